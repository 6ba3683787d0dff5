package readahead

// stream is one sequential reader as the policy sees it: a run of reads whose offsets
// stay within Slack of the furthest point reached.
//
// Window growth rule: once the run has consumed Trigger bytes the window is set to
// InitialWindow. From then on it doubles (capped at MaxWindow) each time consumption
// advances by GrowEvery current windows past the point where that window was set. With
// the defaults (trigger 256 KiB, 5 MiB initial, grow every 2 windows) the window is 5,
// 10, 20, 40 and 64 MiB after 0.25, 10.25, 30.25, 70.25 and 150.25 MiB consumed. Growth
// is deliberately slow: the fetcher adds a lead measured in time for fast readers and
// refills a window only once half of it is used (fetch/lead.go), so the window's job is
// to ride out stalls of a long play, while a player that seeks every few megabytes
// wastes at most its first window and a scanner that reads a little more than Trigger
// wastes at most one InitialWindow.
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
		s.growAt = c + cfg.growEvery()*s.window
	}
	// A loop, not an if: one large read (or a skip within Slack) can cross several
	// thresholds, and the window should not lag behind what the reader has proven.
	for s.window < cfg.MaxWindow && c >= s.growAt {
		s.window = min(2*s.window, cfg.MaxWindow)
		s.growAt += cfg.growEvery() * s.window
	}
}
