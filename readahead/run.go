package readahead

// run is one sequential reader as the policy sees it: a run of reads whose offsets
// stay within Slack of the furthest point reached.
//
// Window growth rule: once the run has consumed Trigger bytes the window is set to
// InitialWindow (ProbeWindow for a header parser's run, and only once it reads past its
// head fetch, see probeRead). From then on it
// doubles (capped at MaxWindow) each time consumption advances by GrowEvery current
// windows past the point where that window was set. With
// the defaults (trigger 256 KiB, 5 MiB initial, grow every 2 windows) the window is 5,
// 10, 20, 40 and 64 MiB after 0.25, 10.25, 30.25, 70.25 and 150.25 MiB consumed. Growth
// is deliberately slow: the fetcher adds a lead measured in time for fast readers and
// refills a window only once half of it is used (readahead/pace), so the window's job is
// to ride out stalls of a long play, while a player that seeks every few megabytes
// wastes at most its first window and a scanner that reads a little more than Trigger
// wastes at most one InitialWindow.
type run struct {
	id       int
	start    int64  // lowest offset of the run; consumption is furthest - start
	furthest int64  // highest end (off+n) of any read in the run
	lastUse  uint64 // Policy.reads when this run last got a read; orders LRU eviction
	window   int64  // current read-ahead window, 0 until it engages (record)
	growAt   int64  // consumption at which the window doubles next

	// Set when the run is made, from its first read.
	// probing: it began in the first block with a read shorter than probeRead
	// (Config.ProbeWindow).
	probing bool
	// head: where a probing run's first read fetched to (Policy.head); its window waits
	// for a read past it.
	head int64
	// carried: the run began with a seek away from a run that had proven it reads in
	// order (run.proven), or past the head on ResumeElsewhere's hint (hinted), so its
	// window starts with its first read instead of at Trigger. A reader that has
	// proven it reads in order goes on reading in order after a seek: a player
	// jumping ahead, or a demuxer seeking to its target after the header and index
	// (FFmpeg's -ss reads 36 KiB there, then megabytes), whose window would otherwise
	// go out a round trip later, with its second read.
	carried bool
	// hinted: carried on ResumeElsewhere's word alone (the run started past the head of
	// a file whose head the kernel's page cache may answer), not on a proven run before
	// it. It proves nothing to the next seek until it has consumed Trigger itself
	// (proven), so a random reader pays one first window per handle, not one per seek.
	hinted bool
}

// probeRead: a run that starts in the file's first block with a read shorter than
// this, bytes, is a header parser's, and earns ProbeWindow rather than InitialWindow,
// and only once it reads past the head its first read fetched (run.head): what
// the kernel reads ahead within that head is no proof, for the head is here already.
// ffprobe reads about 160 kB of an MP4's head and FFmpeg 290 kB for its first frame,
// which the kernel's read-ahead (64, 128, 256 KiB) turns into reads up to 448 or
// 512 KiB: past Trigger, so each such open used to send a 2 MiB window it never read
// (40 of the 59 MB a 20-file library scan took from the origin on the far link). A
// reader that goes on in order reads past the head a few milliseconds later, when its
// window goes out: its next round trip is the same one.
// FFmpeg and ffprobe read 32 KiB, which the kernel sends as 64 KiB; a reader in chunks
// of 128 KiB or more (cat, cp, a player's buffer, threads reading 128 KiB pieces of one
// scan) reaches FUSE with 128 KiB at least and may be a fast player, whose start a
// 2 MiB window would not carry. A run that starts elsewhere is a seek to play from:
// a demuxer decodes the group of pictures up to its target at once, megabytes that a
// 2 MiB window would bring in two round trips, not one.
const probeRead = 128 << 10

// firstRun is the id of a Policy's first run (New's nextID).
const firstRun = 1

// newRun makes the run that the read [off, end) opens; carried as on run, head the
// Policy's.
func newRun(id int, off, end int64, carried bool, head int64, cfg *Config) *run {
	return &run{id: id, start: off, furthest: off, carried: carried, head: head,
		probing: off < cfg.BlockSize && end-off < probeRead}
}

// proven reports whether the run has shown that its reader reads in order, so that a
// seek away from it is carried: its window engaged and, for a hinted run, it has
// consumed Trigger bytes. A header parser's run has proven it once it consumed Trigger,
// even while its window waits for a read past the head (probeRead): FFmpeg's seek to its
// target after the header and index is the read whose window must go out at once.
func (r *run) proven(cfg *Config) bool {
	if r.probing && cfg.MaxWindow > 0 && r.consumed() >= cfg.Trigger {
		return true
	}
	return r.window > 0 && (!r.hinted || r.consumed() >= cfg.Trigger)
}

// consumed is how many bytes the run covers. Reads that arrive below start lower it
// (out-of-order FUSE reads), so arrival order does not change the count.
func (r *run) consumed() int64 { return r.furthest - r.start }

// distance is how far off lies from the furthest point, in either direction.
func (r *run) distance(off int64) int64 {
	if off > r.furthest {
		return off - r.furthest
	}
	return r.furthest - off
}

// record folds the read [off, end) into the run and updates the window.
func (r *run) record(off, end int64, cfg *Config) {
	r.start = min(r.start, off)
	r.furthest = max(r.furthest, end)
	if cfg.MaxWindow == 0 {
		return
	}
	c := r.consumed()
	if r.window == 0 {
		if !r.carried && (c < cfg.Trigger || r.probing && r.furthest <= r.head) {
			return
		}
		r.window = cfg.InitialWindow
		if r.probing && cfg.ProbeWindow > 0 {
			r.window = min(cfg.ProbeWindow, cfg.InitialWindow)
		}
		r.growAt = c + cfg.growEvery()*r.window
	}
	// A loop, not an if: one large read (or a skip within Slack) can cross several
	// thresholds, and the window should not lag behind what the reader has proven.
	for r.window < cfg.MaxWindow && c >= r.growAt {
		r.window = min(2*r.window, cfg.MaxWindow)
		r.growAt += cfg.growEvery() * r.window
	}
}
