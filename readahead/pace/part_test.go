package pace

import "testing"

// Split read-ahead keeps n parts in flight; their sum stays within the lead's bound
// (--read-ahead), in whole blocks, and a part is never less than a block.
func TestPartSizeKeepsPartsWithinTheBound(t *testing.T) {
	const bs = 256 << 10
	for _, tc := range []struct {
		n           int
		part, limit int64
		want        int64
	}{
		{1, 8 << 20, MaxLead, 8 << 20},
		{16, 8 << 20, MaxLead, 4 << 20},  // 16 × 4 MiB = MaxLead
		{16, 8 << 20, 16 << 20, 1 << 20}, // --read-ahead 16MiB
		{16, 8 << 20, 1 << 20, bs},       // at least a block
		{4, 8 << 20, 1 << 30, 8 << 20},   // a larger limit is still held to MaxLead
		{0, 8 << 20, 4 << 20, 4 << 20},   // no split yet counts as one stream
	} {
		if got := PartSize(tc.n, tc.part, bs, tc.limit); got != tc.want {
			t.Errorf("PartSize(%d, %d, %d, %d) = %d, want %d", tc.n, tc.part, bs, tc.limit, got, tc.want)
		}
	}
}
