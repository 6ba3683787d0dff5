// Package readahead decides what to fetch for a read of a remote file: the demand range
// the read waits for and the read-ahead window to keep filled behind it. It is pure: no
// goroutines, no clock, no I/O, no locks. Offsets go in, ranges come out, and the fetcher
// turns them into requests. That is what lets every behaviour below be a line in
// testdata/.
//
// Design:
//   - A Policy serves one file and tracks up to MaxRuns runs. A run is known by
//     the furthest offset its reads reached, not by the previous read: a read belongs to
//     the run whose furthest point is closest, if within Slack either side. Kernel FUSE
//     issues async reads from several threads, so 8.0, 8.5, 8.25, 9.0 MB arrive in any
//     order; matching against the furthest point keeps them one run.
//   - Consumption is furthest minus the lowest offset of the run. Read-ahead engages at
//     Trigger bytes and the window then grows as described on run. A run that begins
//     with a seek away from a run that proved its reader reads in order (run.proven)
//     engages with its first read. So does a run past the head on ResumeElsewhere's
//     hint (the kernel's page cache answered the reader's header reads), though such
//     a run proves nothing to a later seek until it has consumed Trigger. A run whose
//     first read is a parser's (under 128 KiB, in the first block) starts from
//     ProbeWindow instead of InitialWindow, once it reads past the head that first
//     read fetched.
//   - A read outside every run's Slack is a seek: it opens a new run (evicting the
//     least recently used one when MaxRuns are tracked) and its demand fetch is
//     extended to SeekFetch so playback resumes while the new window ramps up. A forward
//     skip within Slack is not a seek: the run and its window carry on.
//   - Fetch and Ahead never overlap: Ahead starts at the first block past both the
//     furthest point and Fetch. Both are block aligned, only clipped at the file size.
//   - Run ids start at 1, increase, and are never reused within a Policy, so an id the
//     fetcher still holds can never name a different run.
//   - The first read of a handle that starts in the file's first block and engages no
//     read-ahead (a scanner's probe, a demuxer's header read) also names the file's last
//     Tail bytes (Decision.Tail), so the fetcher asks for both ends at once. Only a
//     range: no run starts there, and a reader that goes there later opens its run as
//     after any seek. When the tail lies within tailMerge blocks of the read's Fetch,
//     Fetch is extended to the end of the file instead (one request).
//
// Traps:
//   - Superseded is a guess. When a read opens a new run, the run of the previous
//     read is reported as probably abandoned (the reader seeked away), so the fetcher can
//     stop extending its fetches. The old run stays tracked: if its reader comes back
//     within Slack it resumes with its window. Two readers interleaving reads inside
//     their own runs never set Superseded (no new run is made), but the first read
//     of a second reader does mark the first reader's run; that reader's next read
//     returns its full window again, so the cost is a refill, not a stall.
//   - A reader stepping backwards within Slack lowers the run start and so looks like
//     consumption; it can get a forward window it does not use. The waste is bounded by
//     one window per Slack of backward travel, and backward playback is rare.
//   - Runs are never merged. A new run that catches up with a stale one takes over
//     because it is closer; the stale one ages out through LRU.
//   - More concurrent readers than MaxRuns evict each other on every seek-like read
//     and never reach Trigger; size MaxRuns for the expected fan-out.
//   - Not safe for concurrent use: the caller serialises calls on one Policy.
package readahead

import "fmt"

// noRun is the Run of an empty Decision and the Superseded of most decisions.
const noRun = -1

// Decision is what the fetcher must do for one read.
type Decision struct {
	// Run is the id of the run the read was assigned to, noRun (-1) when the read
	// was empty or past EOF (and then every other field is empty too).
	Run int
	// New reports that the read opened a new run: the first read, or a seek away from
	// every known run.
	New bool
	// Superseded, when New, is the run the previous read belonged to: its reader
	// probably seeked away, so the fetcher should shrink its fetches to what is already
	// on the wire. -1 otherwise, and when that run is gone (dropped or forgotten).
	Superseded int
	// Skip reports a read that matched a run but began more than skipGap past its
	// furthest point: a forward skip within Slack. The run and its window go on, but
	// like a seek the read may land on blocks an earlier visit cached, with a missing
	// block a round trip away just behind them (the fetcher waits for it; see
	// fetch.File.awaitFollowing).
	Skip bool
	// Dropped lists runs this read evicted to make room (LRU); the fetcher cancels
	// their fetches. Usually nil.
	Dropped []int
	// Fetch is the demand range the read waits for: the read itself, block aligned,
	// extended to SeekFetch when New, clipped to the file size; a handle's first read
	// of a small file has it run to the end of the file instead of naming a Tail. Never
	// empty for a non-empty Decision.
	Fetch Range
	// Ahead is the read-ahead window to keep filled, nearest block first: from the first
	// block past the run's furthest point (and past Fetch) to furthest + window. Empty
	// until the run has consumed Trigger bytes, and always when MaxWindow is 0.
	Ahead Range
	// Consumed is how many bytes the run covers after this read: from its lowest
	// offset to its furthest point, whatever the arrival order. The fetcher bounds
	// its time-based lead by it (readahead/pace), as the window is.
	Consumed int64
	// Start is the run's lowest offset after this read, where Consumed counts from: 0
	// or within the first block for a reader that began at the head (a copy, a parser),
	// further for a seek or a handle resumed past the head.
	Start int64
	// Tail is the end of the file to fetch now beside this read, which does not wait
	// for it: whole blocks up to the file size, past Fetch. Set only on the Policy's
	// first read, when it starts in the first block, engages no read-ahead, and the
	// file's last Config.Tail bytes lie beyond its Fetch (see tailRange).
	// The fetcher claims the blocks that are missing, on a range of their own with no
	// read-ahead behind it.
	Tail Range
}

// Policy tracks the runs reading one file. Create it with New.
type Policy struct {
	cfg    Config
	blocks blocks
	runs   []*run // at most cfg.MaxRuns, so linear scans are cheap
	nextID int    // id of the next run opened
	reads  uint64 // non-empty reads so far; the LRU clock
	last   int    // run of the previous non-empty read, noRun if none or gone
	// resumed: ResumeElsewhere's hint, until a new run past the head and short of the
	// file's last InitialWindow bytes has used it
	resumed bool
	// head is where a new run's demand fetch in the first block ends at the least, and
	// what a header parser's run must read past before its window engages:
	// Config.headFetch, or what SetEnds gave
	head int64
	// tail is how many bytes at the end a first read at the head names (tailRange):
	// Config.Tail, or what SetEnds gave
	tail int64
	// reach is how far back from the end of the file the furthest-reaching run that
	// read to it began, but for the first run (Probed); 0 if none did
	reach int64
}

// New returns a Policy for a file of size bytes. It panics if cfg does not Validate or
// size is negative: both are programming errors, and callers validate the configuration
// when they parse flags.
func New(cfg Config, size int64) *Policy {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if size < 0 {
		panic(fmt.Sprintf("readahead: negative file size %d", size))
	}
	return &Policy{
		cfg:    cfg,
		blocks: blocks{size: cfg.BlockSize, limit: size},
		nextID: firstRun,
		last:   noRun,
		head:   cfg.headFetch(),
		tail:   cfg.Tail,
	}
}

// SetEnds tells the Policy, before its first read, how much of the file's two ends
// header parsers of files of its kind read (Probes.Ends). A run that starts in the
// first block then fetches e.Head at once, in whole blocks within [SeekFetch,
// HeadFetchMax], and a parser's run engages its window only past it (run.head); the
// first read at the head names the last e.Tail bytes as its tail, within [Tail,
// TailMax]. A parser that reads as the earlier ones did then has its header and index
// in one round trip and sends no window.
func (p *Policy) SetEnds(e Ends) {
	p.head = min(max(p.cfg.blocksUp(e.Head), p.cfg.headFetch()), p.cfg.headFetchMax())
	p.tail = min(max(e.Tail, p.cfg.Tail), p.cfg.tailMax())
}

// Probed reports what the handle read of the file's ends, for Probes.Record when it is
// closed: Head, how far its first run read, when that run was a header parser's (it
// began in the first block with a read shorter than probeRead) and is still tracked;
// Tail, how far back from the end the furthest-reaching later run that read to the end
// began. An MP4's moov read to its end is a tail; a player's stream from the head is
// neither.
func (p *Policy) Probed() Ends {
	e := Ends{Tail: p.reach}
	if s := p.find(firstRun); s != nil && s.probing {
		e.Head = s.furthest
	}
	return e
}

// Read records a read of n bytes at off and returns what to fetch. A read that reaches
// past EOF is clipped to the file; one that starts at or past EOF, or has n <= 0, or a
// negative off, returns an empty Decision (Run -1) and changes nothing.
func (p *Policy) Read(off, n int64) Decision {
	if n <= 0 || off < 0 || off >= p.blocks.limit {
		return Decision{Run: noRun, Superseded: noRun}
	}
	end := off + min(n, p.blocks.limit-off)
	first := p.reads == 0
	p.reads++
	d := Decision{Superseded: noRun}

	s := p.match(off)
	if s == nil {
		d.New = true
		d.Dropped = p.makeRoom()
		prev := p.find(p.last)
		if prev != nil {
			d.Superseded = p.last
		}
		proven := prev != nil && prev.proven(&p.cfg)
		hinted := !proven && p.resumed && off >= p.head
		if hinted && off+p.cfg.InitialWindow < p.blocks.limit {
			p.resumed = false // spent: one window on the hint's word per handle
		}
		s = newRun(p.nextID, off, end, proven || hinted, p.head, &p.cfg)
		s.hinted = hinted
		p.nextID++
		p.runs = append(p.runs, s)
	} else if off > s.furthest+skipGap {
		d.Skip = true
	}
	s.record(off, end, &p.cfg)
	s.lastUse = p.reads
	if s.furthest == p.blocks.limit && s.id != firstRun {
		p.reach = max(p.reach, p.blocks.limit-s.start)
	}
	p.last = s.id

	d.Run = s.id
	d.Consumed, d.Start = s.consumed(), s.start
	fetchEnd := end
	if d.New {
		least := p.cfg.SeekFetch
		if off < p.cfg.BlockSize {
			least = p.head
		}
		fetchEnd = max(end, p.blocks.down(off)+least)
	}
	d.Fetch = p.blocks.span(off, fetchEnd)
	if s.window > 0 {
		d.Ahead = p.blocks.span(max(p.blocks.up(s.furthest), d.Fetch.End), s.furthest+s.window)
	}
	if first && off < p.cfg.BlockSize {
		p.tailRange(&d)
	}
	return d
}

// tailMerge is how many blocks may lie between what a head read fetches and the file's
// tail for the two to be one request: the read's Fetch then runs to the end of the
// file, at most tailMerge blocks more than two separate ranges would bring, one request
// fewer. A small file (a few blocks) costs one range.
const tailMerge = 2

// tailRange sets d.Tail for a handle's first read at the head of the file: the blocks
// holding the file's last Policy.tail bytes (Config.Tail, or what SetEnds gave) that
// Fetch does not reach. When they start within tailMerge blocks of Fetch's end, Fetch is
// extended to the end of the file instead.
//
// A read that engages read-ahead (it consumed Trigger at once: a player streaming from
// the start) names no tail: what it needs next is its window, and a tail beside it
// shares the link with that window's first bytes (eight players starting at once on
// the far link froze for 26-35 ms with it). A probe or a demuxer parsing a header reads
// less than Trigger first (FFmpeg 32 KiB, which the kernel sends as 64 to 128 KiB).
func (p *Policy) tailRange(d *Decision) {
	if p.tail <= 0 || !d.Ahead.Empty() {
		return
	}
	size := p.blocks.limit
	tail := p.blocks.span(max(size-p.tail, d.Fetch.End), size)
	switch {
	case tail.Empty():
		// Fetch holds the tail already.
	case tail.Off-d.Fetch.End > tailMerge*p.cfg.BlockSize:
		d.Tail = tail
	default:
		d.Fetch.End = size
	}
}

// skipGap is how far past a run's furthest point a read must begin to be a skip
// (Decision.Skip), not one of the kernel's out-of-order reads of one scan: those land
// at most a couple of its reads (up to 1 MiB each) ahead.
const skipGap = 2 << 20

// ResumeElsewhere tells the Policy, before its first read, that the kernel's page cache
// may answer this handle's reads of the file's head: an earlier handle filled it, and
// the caller has the head. A new run that starts past the head (the head a first read
// fetches, Policy.head: a read within it is a parser's whose earlier reads the page
// cache answered, a library rescan's) is then a player's seek to play from, whose header
// reads never reached us (FFmpeg's -ss on a file opened
// before reads 36 KiB at its target, then megabytes): it engages read-ahead with its
// first read, as a seek away from a proven run does (run.carried), instead of a round
// trip later with its second. The hint lasts until such a run starts short of the
// file's last InitialWindow bytes: reads nearer the end are an index's (an MKV's cues,
// read before the seek to play from), whose window the end of the file clips. A reader
// that stops after its first read wastes one first window per handle; a seek away from
// that run is carried only once it has consumed Trigger (run.proven).
func (p *Policy) ResumeElsewhere() { p.resumed = true }

// Forget drops a run, e.g. when the handle reading it is closed. Unknown ids are
// ignored.
func (p *Policy) Forget(run int) {
	for i, s := range p.runs {
		if s.id == run {
			p.runs = append(p.runs[:i], p.runs[i+1:]...)
			break
		}
	}
	if p.last == run {
		p.last = noRun
	}
}

// Runs returns how many runs are tracked.
func (p *Policy) Runs() int { return len(p.runs) }

// match returns the run whose furthest point is closest to off, within Slack; on a
// tie the most recently used one. Nil when off is a seek.
func (p *Policy) match(off int64) *run {
	var best *run
	for _, s := range p.runs {
		d := s.distance(off)
		if d > p.cfg.Slack {
			continue
		}
		if best == nil || d < best.distance(off) || (d == best.distance(off) && s.lastUse > best.lastUse) {
			best = s
		}
	}
	return best
}

// makeRoom evicts least recently used runs until a new one fits, returning their ids.
func (p *Policy) makeRoom() []int {
	var dropped []int
	for len(p.runs) >= p.cfg.MaxRuns {
		lru := 0
		for i, s := range p.runs {
			if s.lastUse < p.runs[lru].lastUse {
				lru = i
			}
		}
		dropped = append(dropped, p.runs[lru].id)
		p.Forget(p.runs[lru].id)
	}
	return dropped
}

func (p *Policy) find(id int) *run {
	for _, s := range p.runs {
		if s.id == id {
			return s
		}
	}
	return nil
}
