package pace

import (
	"testing"
	"time"
)

// Continue: a refill waits for its run's range when the reader will not reach the range's
// end while it waits, or when the reader waits on a range no faster than it; a reader
// close behind a range that outpaces it gets its refill at once, beside the range.
func TestContinue(t *testing.T) {
	const (
		rtt = 200 * time.Millisecond
		mb  = 1 << 20
	)
	t0 := time.Unix(0, 0)
	now := t0.Add(time.Second)
	// A range from 0 to 10 MiB that has delivered next bytes since its first one at t0.
	inFlight := func(next int64) InFlight { return InFlight{FirstAt: t0, FirstOff: 0, Next: next, Want: 10 * mb} }
	for _, tc := range []struct {
		name     string
		bps      float64
		furthest int64
		f        InFlight
		want     bool
	}{
		// 9 MiB delivered in a second, 1 MiB left: 0.11 s and a round trip; the
		// reader, 3 MiB from the end at 1 MB/s, needs 3 s.
		{"slow reader far behind", 1e6, 7 * mb, inFlight(9 * mb), true},
		// The same range, its reader 1.5 MiB from the end at 20 MB/s: 80 ms.
		{"fast reader close behind", 20e6, 8*mb + mb/2, inFlight(9 * mb), false},
		// 8 MB/s reader waiting on a range that has delivered 3 MiB in its first second
		// (slow start): a range beside it would start cold.
		{"reader waits on a slow range", 3e6, 3 * mb, inFlight(3 * mb), true},
		// The reader waits, but the range delivers over twice its rate: the headroom is
		// there, and the reader reaches the end in 0.26 s.
		{"reader waits on a range twice its rate", 4e6, 9 * mb, inFlight(9 * mb), false},
		{"range not answered", 1e6, 0, InFlight{Want: 10 * mb}, false},
		{"rate unknown", 0, 7 * mb, inFlight(9 * mb), false},
		{"reader past the end", 1e6, 10 * mb, inFlight(9 * mb), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Continue(now, rtt, tc.bps, tc.furthest, 10*mb, tc.f); got != tc.want {
				t.Fatalf("Continue = %v, want %v", got, tc.want)
			}
		})
	}
}
