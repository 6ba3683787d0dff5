package fetch

import (
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

// ramp is a smoothed time new ranges took from their answer to deliver pace.RampBytes
// (pace.Continue), in nanoseconds; zero until one has. Safe for concurrent use, as rtt.
type ramp struct{ ns atomic.Int64 }

func (r *ramp) observe(d time.Duration) {
	r.ns.Store(int64(pace.NextRTT(time.Duration(r.ns.Load()), d)))
}

func (r *ramp) get() time.Duration { return time.Duration(r.ns.Load()) }
