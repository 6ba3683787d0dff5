package pace

import (
	"testing"
	"time"
)

// The splitter, driven step by step: a trial whose readers stop waiting is kept when the
// delivery rate rose, and dropped when it did not. A successful split ends the
// starvation that started it, so starvation cannot be what judges the trial.
func TestSplitterJudgesTrialOnRate(t *testing.T) {
	const (
		rtt   = 40 * time.Millisecond
		probe = 200 * time.Millisecond // 5 RTT
		step  = 10 * time.Millisecond
		maxN  = 16
	)
	for _, tc := range []struct {
		name      string
		trialRate int64 // bytes per step during the trial
		wantN     int
		solo      bool
		others    int64 // bytes per step the fetcher's other files received
	}{
		{"faster", 4 * 250 << 10, maxN, false, 0},
		{"no gain", 250 << 10, 1, false, 0},
		{"alone, faster", 4 * 250 << 10, maxN, true, 0},
		{"two copies, faster", 4 * 250 << 10, maxN, false, 250 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sp Splitter
			now := time.Unix(0, 0)
			var delivered, own, starved int64
			run := func(d time.Duration, perStep int64, starve bool) {
				for end := now.Add(d); now.Before(end); now = now.Add(step) {
					delivered += perStep + tc.others
					own += perStep
					if starve {
						starved++
					}
					sp.Update(Sample{Now: now, RTT: rtt, Delivered: delivered, Own: own, Starved: starved, MaxN: maxN, Solo: tc.solo})
				}
			}
			// Warm-up plus splitPatience starved intervals at one connection's speed; a
			// file read alone gets its trial after one, of two round trips but at least
			// soloProbeMin.
			intervals, first := splitPatience+1, probe
			if tc.solo {
				intervals, first = 1, max(2*rtt, soloProbeMin)
			}
			before := probe*time.Duration(intervals-1) + first/2
			run(before, 250<<10, true)
			if sp.n != 1 {
				t.Fatalf("a trial after %v of starved reads, want one after %v", before, probe*time.Duration(intervals-1)+first)
			}
			run(first, 250<<10, true)
			if sp.n != maxN || sp.prevN != 1 {
				t.Fatalf("after %d starved intervals: n=%d prevN=%d, want a trial of %d streams", intervals, sp.n, sp.prevN, maxN)
			}
			// The trial: readers no longer wait.
			run(probe+probe/2, tc.trialRate, false)
			if sp.n != tc.wantN || sp.prevN != 0 {
				t.Fatalf("after the trial: n=%d prevN=%d, want n=%d", sp.n, sp.prevN, tc.wantN)
			}
			// Readers keep up from then on: the count stays.
			run(3*probe, tc.trialRate, false)
			if sp.n != tc.wantN {
				t.Fatalf("later, readers not starved: n=%d, want %d", sp.n, tc.wantN)
			}
		})
	}
}

// A starved file that gets a small share of what the fetcher delivers is one of many
// readers on the link (eight players on the far link while their windows grow): it
// never starts a trial, however long it waits, since sixteen parts of its own would
// freeze the others.
func TestSplitterLeavesASharedLinkAlone(t *testing.T) {
	const (
		rtt  = 200 * time.Millisecond
		step = 10 * time.Millisecond
		maxN = 16
	)
	var sp Splitter
	now := time.Unix(0, 0)
	var delivered, own, starved int64
	for end := now.Add(30 * time.Second); now.Before(end); now = now.Add(step) {
		delivered += 8 * 37 << 10 // 30 MB/s among eight files
		own += 37 << 10
		starved++
		sp.Update(Sample{Now: now, RTT: rtt, Delivered: delivered, Own: own, Starved: starved, MaxN: maxN})
		if sp.n != 1 {
			t.Fatalf("at %v: a trial of %d streams by a file with an eighth of the link", now.Sub(time.Unix(0, 0)), sp.n)
		}
	}
	if sp.starvedIntervals < splitPatience {
		t.Fatalf("starved intervals %d: the test did not reach the point where a trial would start", sp.starvedIntervals)
	}
}
