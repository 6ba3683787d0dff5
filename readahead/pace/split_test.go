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
					// A run past soloProof: a copy read alone is proven one.
					sp.Update(Sample{Now: now, RTT: rtt, Delivered: delivered, Own: own, Consumed: soloProof + own, Starved: starved, MaxN: maxN, Solo: tc.solo})
				}
			}
			// Warm-up plus splitPatience starved intervals at one connection's speed; a
			// file read alone gets its trial after one, of two round trips but at least
			// soloProbeMin.
			intervals, first := splitPatience+1, probe
			if tc.solo {
				intervals, first = 1, max(soloProbeRTTs*rtt, soloProbeMin)
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
		sp.Update(Sample{Now: now, RTT: rtt, Delivered: delivered, Own: own, Consumed: own, Starved: starved, MaxN: maxN})
		if sp.n != 1 {
			t.Fatalf("at %v: a trial of %d streams by a file with an eighth of the link", now.Sub(time.Unix(0, 0)), sp.n)
		}
	}
	if sp.starvedIntervals < splitPatience {
		t.Fatalf("starved intervals %d: the test did not reach the point where a trial would start", sp.starvedIntervals)
	}
}

// A copy read alone from a capped source is expected to get its trial from its second
// waiting read on; a reader that is not alone, whose reads do not wait, or whose source
// is a shared link, is not.
func TestSplitterExpectsTrialOfACopy(t *testing.T) {
	now := time.Unix(0, 0)
	sample := func(i int, starved int64, solo, capped bool) Sample {
		return Sample{Now: now.Add(time.Duration(i) * time.Millisecond), RTT: 40 * time.Millisecond,
			Starved: starved, MaxN: 16, Solo: solo, Capped: capped}
	}
	var copyer, player, shared, web Splitter
	for i := range 4 {
		starved := int64(i) // the first read of a run never counts as starved
		copyer.Update(sample(i, starved, true, true))
		player.Update(sample(i, 0, true, true))
		shared.Update(sample(i, starved, false, true))
		web.Update(sample(i, starved, true, false))
		if got, want := copyer.Expecting(sample(i, starved, true, true)), i >= 2; got != want {
			t.Errorf("copy after %d reads: Expecting=%v, want %v", i+1, got, want)
		}
		if player.Expecting(sample(i, 0, true, true)) {
			t.Errorf("a reader whose reads do not wait is expected to split")
		}
		if shared.Expecting(sample(i, starved, false, true)) {
			t.Errorf("a reader that is not alone is expected to split")
		}
		if web.Expecting(sample(i, starved, true, false)) {
			t.Errorf("a reader of a source that does not cap connections is expected to split")
		}
	}
}

// A copy's reads arrive one block apart, and whether a read waited is known only after
// its Update, so the splitter sees one starved read fewer than it has samples. A copy
// read alone from a capped source must still be judged after soloSamples reads and its
// baseline of one round trip: the trial starts at the first read past both. A web
// server's source waits for two round trips and soloOf reads (see soloSamples).
func TestSplitterJudgesACopyAfterItsBaseline(t *testing.T) {
	const rtt = 53 * time.Millisecond
	for _, tc := range []struct {
		capped bool
		want   time.Duration // first read at or after both the baseline and the samples
	}{{true, 96 * time.Millisecond}, {false, 149 * time.Millisecond}} {
		t0 := time.Unix(0, 0)
		var sp Splitter
		// The first read waits a round trip and more; then one 256 KiB block every
		// 10.5 ms (25 MB/s), every read waiting.
		at := []time.Duration{0, 63, 63, 74, 84, 96, 108, 118, 129, 140, 149}
		split := time.Duration(-1)
		for i, ms := range at {
			d := ms * time.Millisecond
			// The run is past soloProof (a copy that seeked, or a long one).
			sp.Update(Sample{Now: t0.Add(d), RTT: rtt, Delivered: int64(i) << 18, Own: int64(i) << 18, Consumed: soloProof + int64(i)<<18,
				Starved: int64(max(i-1, 0)), MaxN: 16, Solo: true, Capped: tc.capped})
			if sp.N() > 1 {
				split = d
				break
			}
		}
		if split != tc.want {
			t.Errorf("capped=%v: split at %v, want %v", tc.capped, split, tc.want)
		}
	}
}

// A demuxer after a seek reads what arrives as fast as it arrives, so every read waits,
// as a copy's do. From a web server it is not a copy until its run has consumed
// soloProof or waited soloProofRTTs round trips: on the far link the same reads as a
// copy's get no trial in the demuxer's third of a second (2.7 MB), and one after 8 MiB;
// on the cloud link after four round trips; from an object store at once. On a TCP
// path in slow start a block takes longer, and a demuxer's few MB after a seek outlast
// four round trips: a run that began with a seek is proven by its bytes alone, while a
// copy from the head still gets its trial after the round trips.
func TestSplitterWaitsForProofOfAWebServersCopy(t *testing.T) {
	const bs = 256 << 10
	for _, tc := range []struct {
		name       string
		rtt, every time.Duration // round trip; one block read every
		capped     bool
		start      int64 // where the run began
		after      int64 // no trial before this many bytes
		by         int64 // a trial by then
	}{
		{"far web server", 200 * time.Millisecond, 8700 * time.Microsecond, false, 0, soloProof, soloProof + 4*bs},
		{"far object store", 200 * time.Millisecond, 8700 * time.Microsecond, true, 0, 0, 3 << 20},
		// 25 MB/s: four round trips of 40 ms after the first answer are 3 MB read.
		{"cloud web server", 40 * time.Millisecond, 10500 * time.Microsecond, false, 0, 3 << 20, 5 << 20},
		// About 4 MB/s: a connection in slow start on a 200 ms path. A copy of a file a
		// scanner probed starts where the kernel's pages of the head end.
		{"far TCP, a copy from the head", 200 * time.Millisecond, 60 * time.Millisecond, false, 0, 2 << 20, 6 << 20},
		{"far TCP, a copy after a probe's pages", 200 * time.Millisecond, 60 * time.Millisecond, false, 1 << 20, 2 << 20, 6 << 20},
		{"far TCP, a demuxer after a seek", 200 * time.Millisecond, 60 * time.Millisecond, false, 100 << 20, soloProof, soloProof + 4*bs},
	} {
		var sp Splitter
		t0 := time.Unix(0, 0)
		split := int64(-1)
		// The first read waits a round trip; then a block every tc.every, each waiting.
		for i := int64(0); i < 64; i++ {
			d := time.Duration(0)
			if i > 0 {
				d = tc.rtt + time.Duration(i)*tc.every
			}
			sp.Update(Sample{Now: t0.Add(d), RTT: tc.rtt, Delivered: i * bs, Own: i * bs, Consumed: (i + 1) * bs,
				Starved: max(i-1, 0), MaxN: 16, Solo: true, Capped: tc.capped, Start: tc.start})
			if sp.N() > 1 {
				split = (i + 1) * bs
				break
			}
		}
		if split < tc.after || split < 0 || split > tc.by {
			t.Errorf("%s: split after %d bytes, want a trial between %d and %d", tc.name, split, tc.after, tc.by)
		}
	}
}

// Threads that start playing one file from a web server all wait for its first range,
// then keep up: a file read alone whose first reads all waited is not a copy until soloOf
// of them did, so the player's start gets no trial of sixteen parts (four threads at
// 20 MB/s on the far link were split after eight reads, and froze). A capped source's
// copy is still judged after soloSamples reads.
func TestSplitterWaitsForTenReadsOfAWebServersCopy(t *testing.T) {
	const rtt = 200 * time.Millisecond
	t0 := time.Unix(0, 0)
	var sp Splitter
	var starved int64
	for i := range 60 {
		at := t0.Add(time.Duration(i) * 60 * time.Millisecond)
		waited := i < 8 // the start: every thread waits for the first range
		sp.Update(Sample{Now: at, RTT: rtt, Delivered: int64(i) << 18, Own: int64(i) << 18, Consumed: int64(i) << 18,
			Starved: starved, MaxN: 16, Solo: true})
		if waited {
			starved++
		}
		if sp.N() > 1 {
			t.Fatalf("split to %d at read %d (%v): the start of a play is not a copy", sp.N(), i, at.Sub(t0))
		}
	}
}

// A trial is judged from a round trip and the measured ramp (Sample.Ramp) after it
// starts: its parts are new ranges, on new connections, and until they are past their
// slow start the link delivers what one connection did. On the kernel-shaped far link,
// where one connection carries 12.5 of 30 MB/s (a 4 MB send buffer), sixteen parts
// judged from their start showed no gain in their first second in some runs, and a
// 20 MB/s player was held to one connection for splitHold. Without a ramp measured the
// trial is judged as before, from its start.
func TestSplitterJudgesATrialPastItsRamp(t *testing.T) {
	const (
		rtt  = 200 * time.Millisecond
		step = 10 * time.Millisecond
		maxN = 16
		ramp = 800 * time.Millisecond
		one  = 125 << 10 // bytes per step: 12.5 MB/s
		all  = 280 << 10 // 28 MB/s
	)
	for _, tc := range []struct {
		name  string
		ramp  time.Duration
		wantN int
	}{
		{"ramp measured", ramp, maxN},
		{"no ramp measured", 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sp Splitter
			now := time.Unix(0, 0)
			var delivered, starved int64
			run := func(d time.Duration, perStep int64, starve bool) {
				for end := now.Add(d); now.Before(end); now = now.Add(step) {
					delivered += perStep
					if starve {
						starved++
					}
					sp.Update(Sample{Now: now, RTT: rtt, Ramp: tc.ramp, Delivered: delivered, Own: delivered,
						Consumed: soloProof + delivered, Starved: starved, MaxN: maxN, Solo: true})
				}
			}
			run(time.Second, one, true) // a copy alone, at one connection's speed
			if sp.n != maxN {
				t.Fatalf("n=%d after a second of starved reads alone, want a trial of %d", sp.n, maxN)
			}
			// The parts: a round trip and the ramp at one connection's speed, then the link.
			run(rtt+ramp, one, true)
			run(3*time.Second, all, false)
			if sp.n != tc.wantN {
				before, trial := sp.Rates()
				t.Fatalf("n=%d after the trial (%.1f MB/s before, %.1f during), want %d", sp.n, before/1e6, trial/1e6, tc.wantN)
			}
		})
	}
}
