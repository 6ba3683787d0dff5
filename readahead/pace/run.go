package pace

import (
	"time"

	"github.com/playhead/playhead/readahead"
)

// The lead: the read-ahead policy grows its window with consumption, blind to time, so a
// reader consuming 20 MB/s reaches the end of a window in a fraction of a round trip on a
// long link. The fetcher sees time: it measures each run's rate and the origin's answer
// time, and keeps at least rate × leadRTTs round trips requested ahead of the run's
// furthest point, whatever the window says (Lead). It refills only when what is
// requested ahead falls below both the lead and half the window (refillAt, plan.go), so
// each refill is one large range and a slow reader that seeks away leaves at most its
// first window behind.

const (
	// rateWindow is the shortest interval a rate sample spans once the estimate settled,
	// so bursts of kernel reads arriving together do not read as huge rates.
	rateWindow = 500 * time.Millisecond
	// rateSettle is how long a run's rate is averaged from its start (see rateEst).
	rateSettle = 500 * time.Millisecond
	// minRateSpan is the shortest interval an early rate estimate divides by, so two
	// reads arriving together right after the first one returned do not read as an
	// unbounded rate.
	minRateSpan = 50 * time.Millisecond
	// rateFrom: a run's rate estimate starts at the first read past this many bytes
	// from where it began. The reads right after the first one come in a burst (the
	// player catching up on the round trip it waited, the kernel's read-ahead with it):
	// a 3 MB/s player's first megabyte reads as 8 MB/s, a lead past its first window,
	// and a seeking player then costs a second window it never plays (3.7x the bytes
	// played in the bench's seek scenario, against 2.6x).
	rateFrom = 1 << 20
	// stallAge: a read waiting longer than this holds the reader up. Four threads
	// waiting together for a run's first data wait a round trip; a 20 MB/s player's
	// kernel read-ahead read waits a block's transfer, a few milliseconds, and must not
	// hold its estimate back (with any read in flight counting, play at 20 MB/s froze
	// once in four trials of five, its first refill late).
	stallAge = minRateSpan
)

// Run is the pacing state of one reader's run (readahead.Decision.Run): its rate and its
// reads in flight. The zero Run is ready to use.
type Run struct {
	rate     rateEst
	bps      float64     // the rate estimate at the last Lead, bytes/s; 0 while unknown
	inflight []time.Time // when each of the run's reads not yet returned was scheduled
	stallEnd time.Time   // when a read that waited over stallAge last returned
}

// Lead records the read decided by dec at now and returns how many bytes past the run's
// furthest point should be requested: the run's rate over rtt (see Lead), at most
// limit. A new run's estimate starts past its first megabyte (rateFrom).
func (r *Run) Lead(now time.Time, dec readahead.Decision, rtt time.Duration, limit int64) int64 {
	progress := dec.Ahead.Off
	if dec.New {
		progress = max(progress, dec.Fetch.Off+rateFrom)
	}
	r.bps = r.rate.observe(now, progress, r.stalled(now), r.stallEnd)
	return Lead(r.bps, rtt, limit)
}

// Rate is the run's consumption rate as estimated at its last Lead, bytes/s; 0 while
// unknown.
func (r *Run) Rate() float64 { return r.bps }

// Begin registers a read of the run scheduled at now; the caller passes now to End
// when the read returns.
func (r *Run) Begin(now time.Time) { r.inflight = append(r.inflight, now) }

// End removes the read Begin registered at t, noting at now the end of a stall.
func (r *Run) End(t, now time.Time) {
	if now.Sub(t) > stallAge {
		r.stallEnd = now
	}
	for i, u := range r.inflight {
		if u.Equal(t) {
			r.inflight = append(r.inflight[:i], r.inflight[i+1:]...)
			return
		}
	}
}

// stalled reports that one of the run's reads has waited longer than stallAge: the
// reader is held up, not reading at its pace (see rateEst.observe).
func (r *Run) stalled(now time.Time) bool {
	for _, t := range r.inflight {
		if now.Sub(t) > stallAge {
			return true
		}
	}
	return false
}

// rateEst estimates one run's consumption rate.
//
// The run's first read waits a round trip for its data and only the reads after it
// show the reader's pace, so the estimate starts at the second read. For rateSettle it
// is the average since then over at least minRateSpan: a 20 MB/s player shows its rate
// within 50 ms, early enough to refill before the 5 MiB first window runs out, while a
// 3 MB/s player's catch-up burst right after its first read reads as about 5 MB/s, a
// lead of 3 MB that its first window already covers, so it asks for nothing more (a
// player that plays 2 MB and seeks away must cost under 3 times that). After
// rateSettle it is a smoothed rate over rateWindow samples. Bursts are what make the
// early estimate fragile: with the kernel's read-ahead at 1 MiB a 3 MB/s player read in
// 1 MiB jumps, which is one reason the mount keeps it at 256 KiB.
type rateEst struct {
	firstAt  time.Time // the run's first observation
	firstOff int64
	at       time.Time // start of the current sample
	off      int64     // furthest point at at
	bps      float64   // smoothed rate, bytes/s, once settled
	paced    bool      // the estimate starts from the run's second read (see observe)
}

// observe records the run's furthest point at now and returns the rate estimate.
// stalled reports that another read of the run has been waiting over stallAge: the
// estimate does not start while the reader is held up (several threads waiting
// together for the first data, as the shuffled scenario's threads do).
//
// stallEnd is when a read of the run that had waited over stallAge last returned:
// an early estimate that began before it measured the wait, not the reader, and starts
// again from this read.
func (r *rateEst) observe(now time.Time, furthest int64, stalled bool, stallEnd time.Time) float64 {
	if r.firstAt.IsZero() || furthest < r.off || (!r.paced && stalled) {
		*r = rateEst{firstAt: now, firstOff: furthest, at: now, off: furthest}
		return 0
	}
	if !r.paced || (r.bps == 0 && stallEnd.After(r.firstAt)) {
		// The run's first read waited a round trip for its data; the reader's pace
		// shows only from the next read on, so the estimate starts there.
		*r = rateEst{firstAt: now, firstOff: furthest, at: now, off: furthest, paced: true}
		return 0
	}
	since := now.Sub(r.firstAt)
	if since < rateSettle {
		return float64(furthest-r.firstOff) / max(since, minRateSpan).Seconds()
	}
	if r.bps == 0 {
		r.bps = float64(furthest-r.firstOff) / since.Seconds()
		r.at, r.off = now, furthest
	}
	if dt := now.Sub(r.at); dt >= rateWindow {
		r.bps = (r.bps + float64(furthest-r.off)/dt.Seconds()) / 2
		r.at, r.off = now, furthest
	}
	return r.bps
}
