package readahead

// stream is one sequential reader as the policy sees it: a run of reads whose offsets
// stay within Slack of the furthest point reached.
//
// Window growth rule: once the run has consumed Trigger bytes the window is set to
// InitialWindow. From then on it doubles (capped at MaxWindow) each time consumption
// advances by the current window past the point where that window was set, i.e. once
// the reader has used up a whole window. With the defaults (trigger 512 KiB, 2 MiB
// initial) the window is 2, 4, 8, 16, 32 and 64 MiB after 0.5, 2.5, 6.5, 14.5, 30.5 and
// 62.5 MiB consumed. A bulk copy at link speed therefore covers the bandwidth-delay
// product of a 200 ms, 30 MB/s link (6 MB) after about 7 MB, while a scanner that reads
// a little more than Trigger and stops wastes at most one InitialWindow.
type stream struct {
	id       int
	start    int64  // lowest offset of the run; consumption is furthest - start
	furthest int64  // highest end (off+n) of any read in the run
	lastUse  uint64 // Policy.reads when this stream last got a read; orders LRU eviction
	window   int64  // current read-ahead window, 0 until consumption reaches Trigger
	growAt   int64  // consumption at which the window doubles next
}

func newStream(id int, off int64) *stream {
	return &stream{id: id, start: off, furthest: off}
}

// consumed is how many bytes the run covers. Reads that arrive below start lower it
// (out-of-order FUSE reads), so arrival order does not change the count.
func (s *stream) consumed() int64 { return s.furthest - s.start }

// distance is how far off lies from the furthest point, in either direction.
func (s *stream) distance(off int64) int64 {
	if off > s.furthest {
		return off - s.furthest
	}
	return s.furthest - off
}

// record folds the read [off, end) into the run and updates the window.
func (s *stream) record(off, end int64, cfg *Config) {
	s.start = min(s.start, off)
	s.furthest = max(s.furthest, end)
	if cfg.MaxWindow == 0 {
		return
	}
	c := s.consumed()
	if s.window == 0 {
		if c < cfg.Trigger {
			return
		}
		s.window = cfg.InitialWindow
		s.growAt = c + s.window
	}
	// A loop, not an if: one large read (or a skip within Slack) can cross several
	// thresholds, and the window should not lag behind what the reader has proven.
	for s.window < cfg.MaxWindow && c >= s.growAt {
		s.window = min(2*s.window, cfg.MaxWindow)
		s.growAt += s.window
	}
}
