package fetch

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/playhead/playhead/readahead/pace"
)

// Pacing: how far ahead of a run to fetch and over how many range streams is decided by
// readahead/pace from values (the clock, the round trip, the bytes delivered); what the
// fetcher keeps for it is here, guarded as its fields say.

// maxRuns bounds the run states one file keeps.
const maxRuns = 64

// runState is what the fetcher keeps per reader's run. Guarded by File.mu.
type runState struct {
	pace    pace.Run
	scanned int64 // read-ahead blocks below this were claimed or present at the last read
}

// runState returns owner's run state, starting one if there is none. Caller holds mu.
func (fl *File) runState(owner Owner) *runState {
	if len(fl.runs) > maxRuns {
		clear(fl.runs) // readers come and go; a fresh estimate costs a quarter second
	}
	st := fl.runs[owner]
	if st == nil {
		st = &runState{}
		fl.runs[owner] = st
	}
	return st
}

// maxLead is the bound on a run's lead and on split read-ahead in flight (Options.MaxLead).
func (f *Fetcher) maxLead() int64 {
	if f.opts.MaxLead > 0 {
		return f.opts.MaxLead
	}
	return pace.MaxLead
}

// rtt is a smoothed time for the origin to answer a range (pace.NextRTT), in
// nanoseconds. Safe for concurrent use: a sample that races another is one of many.
type rtt struct{ ns atomic.Int64 }

func (r *rtt) observe(d time.Duration) {
	r.ns.Store(int64(pace.NextRTT(time.Duration(r.ns.Load()), d)))
}

func (r *rtt) get() time.Duration {
	if v := r.ns.Load(); v > 0 {
		return time.Duration(v)
	}
	return pace.DefaultRTT
}

// pathRTT is the path's round trip as the shortest recent answer (pace.PathRTT): what
// a held range's receive window is worked out for (rangeStream.boundReceive). Safe for
// concurrent use.
type pathRTT struct {
	mu sync.Mutex
	p  pace.PathRTT
}

func (r *pathRTT) observe(now time.Time, d time.Duration) {
	r.mu.Lock()
	r.p = r.p.Observe(now, d)
	r.mu.Unlock()
}

// get is the estimate, or def until a range has answered.
func (r *pathRTT) get(def time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p.Min > 0 {
		return r.p.Min
	}
	return def
}

// ramp is the smoothed slow start of new ranges (pace.Continue), in nanoseconds: how
// much longer a stream's first range took to deliver its first pace.RampBytes, from its
// answer, than its second RampBytes. Zero until a range has shown it. Sharing a link
// slows both MiBs alike and cancels out; a congestion window growing from ten segments
// slows the first. Smoothed as rtt is; unlike rtt it has no default.
type ramp struct{ rtt }

func (r *ramp) get() time.Duration { return time.Duration(r.ns.Load()) }

// timeRamp starts timing the stream's first range, answered now at off, when its readers
// have claimed two pace.RampBytes of it already, so that it delivers them unless it
// fails or is cut (stopRamp). Later ranges of the stream (a retry, a continued refill on
// the same connection) are not new ones. The stream's goroutine only.
func (s *rangeStream) timeRamp(off, claimed int64) {
	if s.opened {
		return
	}
	s.opened = true
	if claimed-off >= 2*pace.RampBytes {
		s.rampAt, s.rampMid, s.rampFrom = time.Now(), time.Time{}, off
	}
}

// stopRamp ends the timing without a sample: the range paused, failed or was cut.
func (s *rangeStream) stopRamp() { s.rampAt = time.Time{} }

// rampDone takes the timed range's progress to next at now and feeds Fetcher.ramp once
// it has delivered two RampBytes. A block held by a peer (held) came over another
// link than the origin's, and ends the timing. The stream's goroutine only.
func (s *rangeStream) rampDone(next int64, now time.Time, held bool) {
	if s.rampAt.IsZero() {
		return
	}
	got := next - s.rampFrom
	switch {
	case held:
		s.stopRamp()
	case got >= 2*pace.RampBytes && !s.rampMid.IsZero():
		first, second := s.rampMid.Sub(s.rampAt), now.Sub(s.rampMid)
		s.fl.f.ramp.observe(max(first-second, 0))
		s.fl.f.log.Debug("range timed", "path", s.fl.path, "off", s.rampFrom, "first_mib", first, "second_mib", second, "ramp", s.fl.f.ramp.get())
		s.stopRamp()
	case got >= pace.RampBytes && s.rampMid.IsZero():
		s.rampMid = now
	}
}
