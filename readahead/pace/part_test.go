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

// Parts near the reader are small and grow with their distance from it, up to part.
func TestPartAtGrowsWithDistance(t *testing.T) {
	const bs, part = 256 << 10, 4 << 20
	prev := int64(0)
	for _, dist := range []int64{0, 512 << 10, 1 << 20, 3 << 20, 6 << 20, 12 << 20, 64 << 20} {
		got := PartAt(part, dist, bs)
		if got%bs != 0 || got < NearPart || got > part || got < prev {
			t.Fatalf("PartAt(dist %d) = %d: want whole blocks, from NearPart up to part, growing", dist, got)
		}
		prev = got
	}
	if PartAt(part, 0, bs) != NearPart || PartAt(part, 64<<20, bs) != part {
		t.Fatalf("near %d far %d, want %d and %d", PartAt(part, 0, bs), PartAt(part, 64<<20, bs), NearPart, part)
	}
	if PartAt(128<<10, 0, 256<<10) != 256<<10 {
		t.Fatalf("a part is at least a block")
	}
}
