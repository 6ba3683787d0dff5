package pace

import (
	"testing"
	"time"
)

// Continue: a refill waits for its run's range when the reader will not reach the range's
// end while it waits, when the reader waits on a range no faster than it, or when new
// ranges start slower than this one ends; a reader close behind a range that outpaces it
// gets its refill at once, beside the range.
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
		ramp     time.Duration
		want     bool
	}{
		// 9 MiB delivered in a second, 1 MiB left: 0.11 s and a round trip; the
		// reader, 3 MiB from the end at 1 MB/s, needs 3 s.
		{"slow reader far behind", 1e6, 7 * mb, inFlight(9 * mb), 0, true},
		// The same range, its reader 1.5 MiB from the end at 20 MB/s: 80 ms.
		{"fast reader close behind", 20e6, 8*mb + mb/2, inFlight(9 * mb), 0, false},
		// The same, where new ranges took a second longer for their first MiB than for
		// their second (slow start on a 200 ms TCP link): this range's rest takes 0.11 s.
		{"fast reader close behind, new ranges slow", 20e6, 8*mb + mb/2, inFlight(9 * mb), time.Second, true},
		// New ranges whose first MiB came about as fast as their second (a link without
		// slow start) do not hold the refill back.
		{"fast reader close behind, new ranges fast", 20e6, 8*mb + mb/2, inFlight(9 * mb), 10 * time.Millisecond, false},
		// The 8 MB/s player of the kernel-shaped far link: its range answered 100 ms ago
		// and has delivered 1 MiB of 5, the reader is half a MiB behind that. New ranges
		// took 0.9 s longer for their first MiB than for their second; this one delivers
		// its rest in 0.4 s.
		{"player on a TCP link", 8e6, 5*mb + mb/2, InFlight{FirstAt: now.Add(-100 * time.Millisecond), FirstOff: 5 * mb, Next: 6 * mb, Want: 10 * mb}, 900 * time.Millisecond, true},
		{"player on a link without slow start", 8e6, 5*mb + mb/2, InFlight{FirstAt: now.Add(-100 * time.Millisecond), FirstOff: 5 * mb, Next: 6 * mb, Want: 10 * mb}, 100 * time.Millisecond, false},
		// 8 MB/s reader waiting on a range that has delivered 3 MiB in its first second
		// (slow start): a range beside it would start cold.
		{"reader waits on a slow range", 3e6, 3 * mb, inFlight(3 * mb), 0, true},
		// The reader waits, but the range delivers over twice its rate: the headroom is
		// there, and the reader reaches the end in 0.26 s.
		{"reader waits on a range twice its rate", 4e6, 9 * mb, inFlight(9 * mb), 0, false},
		{"range not answered", 1e6, 0, InFlight{Want: 10 * mb}, time.Second, false},
		{"rate unknown", 0, 7 * mb, inFlight(9 * mb), 0, false},
		// Four players of eight sharing the kernel-shaped far link wait on every read
		// behind their first range, so their rate is not known; new ranges' first MiB
		// took 1.3 s longer than their second, and this one's last 0.75 MiB take 0.15 s.
		{"rate unknown, new ranges slow", 0, 9 * mb, InFlight{FirstAt: now.Add(-1850 * time.Millisecond), FirstOff: 0, Next: 9*mb + 256<<10, Want: 10 * mb}, 1300 * time.Millisecond, true},
		{"reader past the end", 1e6, 10 * mb, inFlight(9 * mb), time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Continue(now, rtt, tc.ramp, tc.bps, tc.furthest, 10*mb, tc.f); got != tc.want {
				t.Fatalf("Continue = %v, want %v", got, tc.want)
			}
		})
	}
}
