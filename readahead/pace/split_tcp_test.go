package pace

import (
	"testing"
	"time"
)

// The splitter on the fake link, a reader alone for 40 s (past splitHold, so a held
// split is tried again). On a link that caps each connection the split is kept; on a
// link every connection shares, one connection fills it once out of slow start and the
// split only divides it: it must not be in force once slow start is over, whatever the
// first seconds measured, and a player that one connection keeps up with is split for
// no more than a few seconds.
func TestSplitterOnTCPLink(t *testing.T) {
	const ms = time.Millisecond
	cloud := func() *tcpLink { return &tcpLink{rtt: 40 * ms, capacity: 250e6, connRate: 25e6} }
	far := func() *tcpLink { return &tcpLink{rtt: 200 * ms, capacity: 30e6} }
	// A sender's 4 MB buffer holds one connection to 20 MB/s at 200 ms: sixteen fill
	// the 30 MB/s link, 1.5 times one (on the kernel-shaped link, 16.1 MB/s against
	// 12.1).
	farWin := func() *tcpLink { return &tcpLink{rtt: 200 * ms, capacity: 30e6, connWin: 4e6} }
	// A copy's lead is three round trips of what the link carries (Lead).
	copier := func(l *tcpLink) simReader { return simReader{lead: float64(Lead(l.capacity, l.rtt, MaxLead))} }
	player := simReader{rate: 8e6, lead: float64(Lead(8e6, 200*ms, MaxLead))}
	fast := simReader{rate: 20e6, lead: float64(Lead(20e6, 200*ms, MaxLead))}
	type scenario struct {
		name   string
		link   *tcpLink
		reader simReader
		capped bool
		wantN  int           // N() from settled on
		off    time.Duration // how long after settled N() may differ from wantN in all
		split  time.Duration // the most time at N() > 1 over the whole run; 0: no bound
		// open, when set, is why the Splitter does not meet this case yet: the subtest
		// is skipped with it, so the target stays written down (issue 15).
		open string
	}
	scenarios := []scenario{
		{"copy, object store", cloud(), copier(cloud()), true, simMaxN, 0, 0, ""},
		// A source that caps its connections without saying so (Sample.Capped false):
		// the split is re-judged, and kept.
		{"copy, undeclared per-connection caps", cloud(), copier(cloud()), false, simMaxN, 0, 0, ""},
		{"copy, shared far link", far(), copier(far()), false, 1, 2 * time.Second, 0, sharedOpen},
		{"8 MB/s player, shared far link", far(), player, false, 1, 0, 3 * time.Second, sharedOpen},
		{"copy, far link, 4 MB send buffers", farWin(), copier(farWin()), false, simMaxN, 0, 0, ""},
		{"20 MB/s player, far link, 4 MB send buffers", farWin(), fast, false, simMaxN, 0, 0, ""},
	}
	// Each again on links whose windows the link limits fall to their share.
	for _, tc := range scenarios[:len(scenarios):len(scenarios)] {
		l := *tc.link
		l.cut = true
		tc.name, tc.link = tc.name+", cut windows", &l
		scenarios = append(scenarios, tc)
	}
	for _, tc := range scenarios {
		t.Run(tc.name, func(t *testing.T) {
			if tc.open != "" {
				t.Skip(tc.open)
			}
			const settled, total = 10 * time.Second, 40 * time.Second
			s := newSim(tc.link, tc.reader, tc.capped)
			var off time.Duration
			last := 0
			s.run(total, func(at time.Duration) {
				if n := max(s.sp.N(), 1); n != last {
					t.Logf("%v: n=%d (%.1f MB delivered)", at, n, s.arrived/1e6)
					last = n
				}
				if at > settled && max(s.sp.N(), 1) != tc.wantN {
					off += simStep
				}
			})
			t.Logf("%.1f MB/s over %v", s.arrived/total.Seconds()/1e6, total)
			if off > tc.off {
				t.Errorf("N() was not %d for %v after %v, want at most %v", tc.wantN, off, settled, tc.off)
			}
			if tc.split > 0 && s.split > tc.split {
				t.Errorf("split for %v in all, want at most %v", s.split, tc.split)
			}
			if tc.wantN > 1 && s.sp.Peak() != tc.wantN {
				t.Errorf("peak %d, want the split taken", s.sp.Peak())
			}
		})
	}
}

// sharedOpen is why the shared-link cases are not met: a baseline measured in slow start
// makes sixteen connections look 1.3x faster on a link they share, and the split is
// kept. Re-judging such a split once its rate is steady (tried in 79b9720) met these
// cases but held a 1 GiB copy from a web server on the cloud link to 56% of sixteen
// connections (94.6% before), so it was reverted (issue 15, session 12's note).
const sharedOpen = "known open (issue 15): a split judged against a slow-start baseline is kept on a shared link"
