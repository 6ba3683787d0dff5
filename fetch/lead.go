package fetch

import (
	"sync/atomic"
	"time"
)

// Lead: the read-ahead policy grows its window with consumption, blind to time, so a
// reader consuming 20 MB/s reaches the end of a 2 MiB window in 100 ms, half a round
// trip on a long link. The fetcher sees time: it measures each reader stream's rate and
// the origin's answer time, and keeps at least rate × leadRTTs round trips requested
// ahead of the stream's furthest point, whatever the window says. A slow reader's lead is
// small, so it adds nothing to what a seek wastes.

const (
	// leadRTTs: one round trip for the request, two of margin for the transfer, for the
	// rate rising and for the next range's request (with two, a 20 MB/s player still
	// froze for 15-25 ms at range boundaries on the far link; with three it did not).
	leadRTTs = 3
	// maxLead bounds the lead, as the largest read-ahead window does.
	maxLead = 64 << 20
	// rateWindow is the shortest interval a rate sample spans once the estimate settled,
	// so bursts of kernel reads arriving together do not read as huge rates.
	rateWindow = 500 * time.Millisecond
	// rateSettle is how long a stream's rate is averaged from its start (see rateEst).
	rateSettle = 500 * time.Millisecond
	// defaultRTT is assumed until the first range has answered.
	defaultRTT = 200 * time.Millisecond
)

// ownerState is what the fetcher keeps per reader stream. Guarded by File.mu.
type ownerState struct {
	rate    rateEst
	scanned int64 // read-ahead blocks below this were claimed or present at the last read
}

// rateEst estimates one reader stream's consumption rate. Guarded by File.mu.
//
// The kernel's own read-ahead makes a stream's first second bursty (1 MiB jumps every
// few tens of milliseconds even for a 3 MB/s player), and a rate read off those bursts
// once requested 7 MB ahead for a player that played 2 MB and seeked away. So the
// estimate starts as the average since the stream's first read over at least
// rateSettle, which under-estimates a fast reader for a moment rather than
// over-estimating a slow one, and becomes a smoothed rate over rateWindow samples once
// the stream has run for rateSettle.
type rateEst struct {
	firstAt  time.Time // the stream's first observation
	firstOff int64
	at       time.Time // start of the current sample
	off      int64     // furthest point at at
	bps      float64   // smoothed rate, bytes/s, once settled
}

// observe records the stream's furthest point at now and returns the rate estimate.
func (r *rateEst) observe(now time.Time, furthest int64) float64 {
	if r.firstAt.IsZero() || furthest < r.off {
		*r = rateEst{firstAt: now, firstOff: furthest, at: now, off: furthest}
		return 0
	}
	since := now.Sub(r.firstAt)
	if since < rateSettle {
		return float64(furthest-r.firstOff) / rateSettle.Seconds()
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

// rtt is a smoothed time for the origin to answer a range, in nanoseconds.
type rtt struct{ ns atomic.Int64 }

func (r *rtt) observe(d time.Duration) {
	old := r.ns.Load()
	if old == 0 {
		r.ns.Store(int64(d))
		return
	}
	r.ns.Store((3*old + int64(d)) / 4)
}

func (r *rtt) get() time.Duration {
	if v := r.ns.Load(); v > 0 {
		return time.Duration(v)
	}
	return defaultRTT
}

// lead returns how many bytes past its furthest point a reader stream consuming bps
// should have requested.
func (f *Fetcher) lead(bps float64) int64 {
	l := int64(bps * f.rtt.get().Seconds() * leadRTTs)
	return min(max(l, 0), maxLead)
}
