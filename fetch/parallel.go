package fetch

import (
	"time"

	"github.com/playhead/playhead/readahead"
	"github.com/playhead/playhead/readahead/pace"
)

// Parallel range streams: pace.Splitter decides how many range streams a file's
// read-ahead is split into; here the fetcher feeds it and sizes the parts.

// updateSplit gives the splitter the sample of a sequential read of the file at now and
// logs a change of stream count. Caller holds mu.
func (fl *File) updateSplit(dec readahead.Decision, now time.Time) {
	was := fl.split.N()
	if dec.New && dec.Superseded >= 0 {
		fl.split.Restart()
	}
	sample := pace.Sample{Now: now, RTT: fl.f.rtt.get(), Ramp: fl.f.ramp.get(), Delivered: fl.f.delivered.Load(),
		Own: fl.delivered.Load(), Starved: fl.starved.Load(), MaxN: fl.f.opts.MaxParallel,
		// Alone: no other file is open. Counting range streams instead would read eight
		// players as alone whenever the others' bounded ranges had just finished.
		Solo: fl.f.openFiles.Load() <= 1, Capped: fl.f.preparer != nil, Consumed: dec.Consumed,
		Start: dec.Start}
	fl.split.Update(sample)
	if !fl.prepared && fl.split.Expecting(sample) {
		// Connections for the trial's streams, dialed while its baseline is measured
		// (pace.Splitter.Expecting). Once per File.
		fl.prepared = true
		fl.f.preparer.Prepare(fl.f.opts.MaxParallel)
	}
	if n := fl.split.N(); n != was && was != 0 {
		// Info: a change of stream count is rare (a trial, its verdict) and it
		// changes what the link carries for every reader of the mount.
		before, trial := fl.split.Rates()
		fl.f.log.Info("read-ahead streams", "path", fl.path, "from", was, "to", n,
			"open_files", fl.f.openFiles.Load(), "starved_intervals", fl.split.StarvedIntervals(),
			"rate_before", int64(before), "rate_trial", int64(trial))
	}
}

// activeRangeStreams counts the streams with claimed blocks left. Caller holds mu.
func (fl *File) activeRangeStreams() int {
	n := 0
	for _, s := range fl.rangeStreams {
		if !s.stopped && s.next < s.want {
			n++
		}
	}
	return n
}

// partSize is the size of one part of split read-ahead (pace.PartSize). Caller holds mu.
func (fl *File) partSize() int64 {
	return pace.PartSize(fl.split.N(), fl.f.opts.PartSize, fl.bs, fl.f.maxLead())
}
