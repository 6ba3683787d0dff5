package fetch

import (
	"context"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// perBody caps every body to its own rate, as an object store caps each connection.
type perBody struct {
	source.Source
	bps int
}

func (p perBody) OpenRange(ctx context.Context, path string, r source.Range, want source.Version) (source.Body, error) {
	b, err := p.Source.OpenRange(ctx, path, r, want)
	if err != nil {
		return nil, err
	}
	return &cappedBody{Body: b, lim: rate.NewLimiter(rate.Limit(p.bps), 64<<10)}, nil
}

type cappedBody struct {
	source.Body
	lim *rate.Limiter
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if len(p) > 64<<10 {
		p = p[:64<<10]
	}
	n, err := c.Body.Read(p)
	if n > 0 {
		c.lim.WaitN(context.Background(), n)
	}
	return n, err
}

// sequentialScan reads the whole file in 1 MiB reads with a 16 MiB read-ahead window.
func sequentialScan(t *testing.T, fx *fixture) {
	t.Helper()
	size := fx.file.Size()
	for off := int64(0); off < size; off += 1 << 20 {
		if err := fx.read(t, off, 1<<20, ahead(1, off+1<<20, min(off+16<<20, size))); err != nil {
			t.Fatal(err)
		}
	}
}

func splitState(fx *fixture) (n, peak int) {
	fx.file.mu.Lock()
	defer fx.file.mu.Unlock()
	return fx.file.split.n, fx.file.split.peak
}

// splitRejected reports whether the controller tried more streams and went back.
func splitRejected(fx *fixture) bool {
	fx.file.mu.Lock()
	defer fx.file.mu.Unlock()
	return !fx.file.split.holdUntil.IsZero()
}

// Connections capped one by one: the read-ahead splits into parallel ranges.
func TestSplitsWhenEachConnectionIsCapped(t *testing.T) {
	if testing.Short() {
		t.Skip("measures real throughput for a few seconds")
	}
	o := openEnded()
	o.PartSize = 1 << 20
	fx := newFixture(t, 40<<20, func(s source.Source) source.Source {
		return perBody{memsrc.WithLatency(s, 10*time.Millisecond), 4 << 20}
	}, o)
	sequentialScan(t, fx)
	if _, peak := splitState(fx); peak < 4 {
		t.Fatalf("per-connection cap: read-ahead split into at most %d streams, want 4 or more", peak)
	}
	if st := fx.mem.Stats(); st.BytesServed > fx.file.Size()*11/10 {
		t.Fatalf("split ranges served %d bytes for a %d-byte file", st.BytesServed, fx.file.Size())
	}
}

// One shared link: splitting is tried once, gains nothing, and is dropped.
func TestNoSplitOnASharedLink(t *testing.T) {
	if testing.Short() {
		t.Skip("measures real throughput for a few seconds")
	}
	o := openEnded()
	o.PartSize = 1 << 20
	fx := newFixture(t, 40<<20, func(s source.Source) source.Source {
		return memsrc.WithBandwidth(memsrc.WithLatency(s, 10*time.Millisecond), 14<<20)
	}, o)
	sequentialScan(t, fx)
	if n, peak := splitState(fx); n != 1 || !splitRejected(fx) {
		t.Fatalf("shared link: split tried up to %d streams, rejected: %v, now %d; want one trial, rejected, back to 1", peak, splitRejected(fx), n)
	}
}

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
		others    int64 // bytes per step the Fetcher's other files received
	}{
		{"faster", 4 * 250 << 10, maxN, false, 0},
		{"no gain", 250 << 10, 1, false, 0},
		{"alone, faster", 4 * 250 << 10, maxN, true, 0},
		{"two copies, faster", 4 * 250 << 10, maxN, false, 250 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sp splitter
			now := time.Unix(0, 0)
			var delivered, own, starved int64
			run := func(d time.Duration, perStep int64, starve bool) {
				for end := now.Add(d); now.Before(end); now = now.Add(step) {
					delivered += perStep + tc.others
					own += perStep
					if starve {
						starved++
					}
					sp.update(now, rtt, delivered, own, starved, maxN, tc.solo)
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

// A starved file that gets a small share of what the Fetcher delivers is one of many
// readers on the link (eight players on the far link while their windows grow): it
// never starts a trial, however long it waits, since sixteen parts of its own would
// freeze the others.
func TestSplitterLeavesASharedLinkAlone(t *testing.T) {
	const (
		rtt  = 200 * time.Millisecond
		step = 10 * time.Millisecond
		maxN = 16
	)
	var sp splitter
	now := time.Unix(0, 0)
	var delivered, own, starved int64
	for end := now.Add(30 * time.Second); now.Before(end); now = now.Add(step) {
		delivered += 8 * 37 << 10 // 30 MB/s among eight files
		own += 37 << 10
		starved++
		sp.update(now, rtt, delivered, own, starved, maxN, false)
		if sp.n != 1 {
			t.Fatalf("at %v: a trial of %d streams by a file with an eighth of the link", now.Sub(time.Unix(0, 0)), sp.n)
		}
	}
	if sp.starvedRuns < splitPatience {
		t.Fatalf("starved intervals %d: the test did not reach the point where a trial would start", sp.starvedRuns)
	}
}
