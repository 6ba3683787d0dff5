package fetch

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/playhead/playhead/readahead"
	"github.com/playhead/playhead/readahead/pace"
)

// Claiming blocks: the pending set. A missing block a read or its read-ahead needs is
// claimed by exactly one range stream (rangestream.go), which completes it with data or
// an error, so readers wait on the claim instead of fetching again.

// pending is a block claimed by a stream. done is closed once data or err is set.
type pending struct {
	owner   *rangeStream
	waiters int // readers registered on it; guarded by File.mu
	done    chan struct{}
	data    []byte      // the block's bytes, in buf; set before done is closed
	buf     *blockBuf   // holds data; the entry's reference is dropped by releaseIfDone
	err     error       // set before done is closed
	landed  bool        // written to the cache, skipped, or held elsewhere (writer.go); guarded by File.mu
	read    atomic.Bool // a reader has had the bytes (see writer.go)
	// covered is how many of the block's bytes the reads registered on it take; guarded
	// by File.mu. A held block read whole needs no keeping once read (landHeld).
	covered int64
	swept   bool // a held block a keep sweep let go of (keep.go): written, not kept again
}

// failure remembers a block's failed fetch for failMemory, so that the retries the kernel
// makes of a failed read (it re-reads after its read-ahead fails) fail at once instead of
// each waiting out IOTimeout again. Only a block a reader waited on fails later reads
// (demanded): one our own read-ahead fetched for nobody is only kept from read-ahead
// for a while, and a reader that reaches it after the origin came back gets it.
type failure struct {
	err      error
	until    time.Time
	demanded bool
}

// failMemory is how long a failed block fails new reads at once. Long enough to cover
// the kernel's immediate re-read of a failed page, short enough that a user retrying
// after the origin came back is not refused.
const failMemory = 2 * time.Second

// present reports whether block b is cached or claimed. Caller holds mu.
func (fl *File) present(b int64) bool {
	if _, ok := fl.pending[b]; ok {
		return true
	}
	if _, ok := fl.kept[b]; ok {
		return true
	}
	return fl.f.store.Has(fl.key, b)
}

// schedule claims the missing blocks that [first, end) and the decision ask for, and
// returns the pending entries of [first, end) (nil for blocks believed cached), each with
// the caller registered as a waiter. With policy false the decision is ignored.
// What to claim is decided by pace.Claim; schedule carries it out under mu.
// For a sequential read it also returns the reader's run state and the time the
// read was registered in it (pace.Run.Begin), for the caller to end when done. span is
// the bytes the caller reads (pending.covered).
func (fl *File) schedule(owner Owner, dec readahead.Decision, first, end int64, policy bool, span readahead.Range) ([]*pending, *runState, time.Time, error) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.err != nil {
		return nil, nil, time.Time{}, fl.err
	}
	now := time.Now()
	read := pace.Read{Dec: dec, Policy: policy, First: first, End: end}
	if policy && fl.leavesOpenRange(owner, dec) {
		// From this read on the reader's runs are planned as a seeking reader's
		// (pace.Setting.Left).
		if len(fl.left) > maxRuns {
			clear(fl.left) // readers come and go; one still open may be opened again
		}
		fl.left[owner.Handle] = true
	}
	var st *runState
	if read.Sequential() {
		st = fl.runState(owner)
	}
	plan := fl.plan(read, owner, st, now)
	if err := fl.demandFailed(first, end, now); err != nil {
		return nil, nil, time.Time{}, err
	}
	if read.Sequential() && fl.f.opts.MaxParallel > 1 {
		fl.updateSplit(dec, now)
	}
	claimed, used := fl.claim(owner, read, plan, st, now)
	if st != nil {
		st.scanned = max(st.scanned, claimed)
	}
	if policy {
		fl.abandon(owner, dec, used)
	}
	waits := make([]*pending, end-first)
	for b := first; b < end; b++ {
		if p := fl.pending[b]; p != nil {
			p.waiters++
			p.covered += fl.overlap(b, span)
			waits[b-first] = p
		}
	}
	var at time.Time
	if st != nil {
		at = time.Now()
		st.pace.Begin(at)
	}
	return waits, st, at, nil
}

// plan asks pace.Claim which blocks read r claims. st is the state of the read's run
// when r is sequential, else nil. Caller holds mu.
func (fl *File) plan(r pace.Read, owner Owner, st *runState, now time.Time) pace.Plan {
	s := pace.Setting{Now: now, RTT: fl.f.rtt.get(), MaxLead: fl.f.maxLead(), BlockSize: fl.bs,
		Blocks: fl.nblocks, OpenEndedWindow: fl.f.opts.OpenEndedWindow, Split: fl.split.N(),
		PartSize: fl.partSize(), Left: fl.left[owner.Handle]}
	var run *pace.Run
	if st != nil {
		run, s.Scanned = &st.pace, st.scanned
		s.Busy = fl.busyRange(owner, now)
	}
	return pace.Claim(r, run, s)
}

// demandFailed returns the error of a block of [first, end) whose fetch failed within
// failMemory while a reader waited for it, unless it is cached or claimed again now; it
// forgets the failures of the other blocks of the read, so a read that reaches a block
// our own read-ahead failed on gets a new attempt. Caller holds mu.
func (fl *File) demandFailed(first, end int64, now time.Time) error {
	for b := first; b < end; b++ {
		if f, ok := fl.failed[b]; ok {
			if f.demanded && now.Before(f.until) && !fl.present(b) {
				return f.err
			}
			delete(fl.failed, b)
		}
	}
	return nil
}

// claim claims the missing blocks of plan p for range streams, and the tail the
// decision names when the read goes to the origin (tail.go). It returns where it
// stopped (the plan's end, or the first block left for a later read) and the streams it
// gave blocks to for the read. Caller holds mu.
func (fl *File) claim(owner Owner, r pace.Read, p pace.Plan, st *runState, now time.Time) (int64, map[*rangeStream]bool) {
	tail := fl.wantsTail(r)
	upto, used := fl.claimRead(owner, r, p, st, now)
	if tail {
		fl.claimTail(owner, r, now)
	}
	return upto, used
}

// claimRead claims the missing blocks of plan p (see claim). Caller holds mu.
func (fl *File) claimRead(owner Owner, r pace.Read, p pace.Plan, st *runState, now time.Time) (int64, map[*rangeStream]bool) {
	sequential := r.Sequential()
	split := sequential && fl.split.N() > 1
	minPart := pace.MinPart(fl.partSize(), p.Window, fl.bs)
	used := map[*rangeStream]bool{}
	end, tEnd := r.End, p.End
	var rc *refillCtx
	if st != nil {
		rc = &refillCtx{now: now, bps: st.pace.Rate(), furthest: r.Dec.Ahead.Off}
	}
	fl.claimHeadAlone(owner, r, p, now, used)
	for b := p.First; b < tEnd; {
		if st != nil && b >= end && b < st.scanned {
			// Read-ahead below this run's mark was claimed by an earlier read: skip
			// rescanning it (a lead of 64 MiB is 256 cache lookups per read). A block
			// lost there since is claimed again when a read reaches it.
			b = min(st.scanned, tEnd)
			continue
		}
		if fl.present(b) || fl.recentlyFailed(b, now) {
			b++
			continue
		}
		e := b + 1
		for e < tEnd && !fl.present(e) && !fl.recentlyFailed(e, now) {
			e++
		}
		if split && b >= end && e == tEnd && tEnd < fl.nblocks && e-b < minPart {
			// The window's tail grows a block per read; split read-ahead waits until
			// pace.MinPart blocks are missing rather than open a range per block.
			return b, used
		}
		if upto := fl.assign(owner, b, e, sequential, p.Window, p.OpenEnded, r.First, used, rc); upto < e {
			return upto, used // no stream free for the rest: the next read assigns it
		}
		b = e
	}
	return tEnd, used
}

// claimHeadAlone gives the first block of read r a range of its own when r needs two or
// more missing blocks that no stream is bringing: the read waits for all of them, and
// two ranges side by side bring the first two in one block's transfer on an origin that
// caps each connection (object stores: 10 ms a block at 25 MB/s), where one range takes
// two; on a link they share, both finish when one range would have. A seek lands inside
// a block, so its first read needs that block's tail and the next block: the first
// 256 KiB after a seek on the cloud link took 2 round trips (75-80 ms), now 1.5. The
// rest of the read and its read-ahead go on one range from the second block, as before.
//
// From a source that caps each connection (fetch.Preparer: an object store) every block
// of such a read gets a range of its own, up to headAloneMax, and read-ahead starts at
// the read's end: the kernel reads a player's unaligned 256 KiB in two requests, the
// second sent when the first is answered and reaching a block past the first read, so
// that block, left to the read-ahead range behind the read's own, took a second block
// time (the first 256 KiB after a seek from MinIO: 69 ms, 1.6 round trips). On a shared
// link the parts would only divide it, so other sources keep one range from the second
// block. Caller holds mu.
func (fl *File) claimHeadAlone(owner Owner, r pace.Read, p pace.Plan, now time.Time, used map[*rangeStream]bool) {
	a := r.First
	if r.End-a < 2 || a < p.First || a+1 >= p.End {
		return
	}
	if fl.present(a) || fl.present(a+1) || fl.recentlyFailed(a, now) || fl.rangeStreamFor(a) != nil {
		return
	}
	alone := int64(1)
	if fl.f.preparer != nil {
		alone = min(r.End-a, headAloneMax, p.End-a-1)
	}
	for b := a; b < a+alone; b++ {
		if b > a && (fl.present(b) || fl.recentlyFailed(b, now) || fl.rangeStreamFor(b) != nil) {
			return
		}
		fl.assign(owner, b, b+1, false, p.Window, false, a, used, nil)
	}
}

// headAloneMax bounds the ranges claimHeadAlone opens for one read: a first read of a
// megabyte (the kernel's largest) in 256 KiB blocks.
const headAloneMax = 4

// leavesOpenRange reports whether the decision has owner's reader leave a run (a seek
// away: the run is dropped or superseded) that an open-ended range of its handle was
// still bringing. Leaving a bounded run is not counted: a player or a scanner that reads
// a file's head, then its index at the end, then returns to the head leaves only the
// head's small bounded window, and its play may still be opened at once. Caller holds
// mu.
func (fl *File) leavesOpenRange(owner Owner, dec readahead.Decision) bool {
	abandoned := abandonedRuns(dec)
	for _, s := range fl.rangeStreams {
		if s.owner.Handle == owner.Handle && s.run && !s.stopped && s.reqEnd >= fl.size &&
			s.next < s.reqEnd && slices.Contains(abandoned, s.owner.Run) {
			return true
		}
	}
	return false
}

// abandonedRuns is the runs the decision has its reader leave: those it dropped, and the
// one a new run superseded.
func abandonedRuns(dec readahead.Decision) []int {
	if dec.Superseded >= 0 && dec.Superseded != dec.Run {
		return append(slices.Clip(dec.Dropped), dec.Superseded)
	}
	return dec.Dropped
}

// abandon truncates the range streams of owner's handle that worked for runs the
// decision dropped or superseded (the reader seeked away), unless this read gave them
// blocks. Caller holds mu.
func (fl *File) abandon(owner Owner, dec readahead.Decision, used map[*rangeStream]bool) {
	abandoned := abandonedRuns(dec)
	if len(abandoned) == 0 {
		return
	}
	for _, s := range fl.rangeStreams {
		if s.owner.Handle == owner.Handle && !used[s] && slices.Contains(abandoned, s.owner.Run) {
			fl.truncate(s)
		}
	}
}

// recentlyFailed reports a block whose fetch failed within failMemory: read-ahead does
// not claim it again. Caller holds mu.
func (fl *File) recentlyFailed(b int64, now time.Time) bool {
	f, ok := fl.failed[b]
	return ok && now.Before(f.until)
}

// assign claims the missing run [a, e) for a stream: an existing one that will reach it
// within read-through distance, else a new one. Caller holds mu.
// window is the read-ahead window's size: unless open (pace.Plan.OpenEnded) a sequential
// stream is a bounded range of that size, so a reader that seeks away after a few
// megabytes leaves at most a window in flight, not whatever the path between us and the
// origin buffers (a bandwidth-delay product or more) behind an open-ended range.
// reader is the block the read starts at: split parts near it are smaller (pace.PartAt).
// It returns the first block it could not assign (e when all were).
// rc is the run's state for a continued refill (nil: none).
// A stream takes blocks only up to its reqEnd, which never passes the end of its tier's
// stretch (runbounds.go): a run that crosses one is given to a stream per stretch, so no
// block waits behind blocks of another tier.
func (fl *File) assign(owner Owner, a, e int64, sequential bool, window int64, open bool, reader int64, used map[*rangeStream]bool, rc *refillCtx) int64 {
	split := sequential && fl.split.N() > 1
	for a < e {
		stop := e
		if split {
			stop = min(e, a+pace.PartAt(fl.partSize(), max(a-reader, 0)*fl.bs, fl.bs)/fl.bs)
		}
		s := fl.rangeStreamFor(a)
		if s == nil && rc != nil && !split {
			s = fl.continuation(owner, a, fl.refillEnd(a, stop, window, open), rc)
		}
		if split && s != nil && s.want-s.next >= fl.partSize() && fl.activeRangeStreams() < fl.split.N() &&
			!(fl.takeSent(s) && a*fl.bs < s.reqEnd) {
			s = nil // that stream has a part queued already: start another range beside it
		}
		if s == nil {
			if split && fl.activeRangeStreams() >= fl.split.N() {
				return a // the rest waits for a stream to finish its part
			}
			reqEnd, bounded := fl.size, true
			switch {
			case !sequential || split:
				reqEnd = min(stop*fl.bs, fl.size)
			default:
				reqEnd = fl.refillEnd(a, stop, window, open)
				bounded = !open || reqEnd < fl.size
			}
			s = fl.startRangeStream(owner, a*fl.bs, reqEnd, bounded)
			s.run = sequential && !split
		}
		stop = min(stop, fl.blockUp(s.reqEnd))
		// From a, not only from want: a block below want that was present when the
		// stream first passed it (cached, or claimed by another stream) may be gone now.
		for b := min(a, s.want/fl.bs); b < stop; b++ {
			if b*fl.bs >= s.next && !fl.present(b) {
				fl.pending[b] = &pending{owner: s, done: make(chan struct{})}
			}
		}
		if w := min(stop*fl.bs, fl.size); w > s.want {
			s.want = w
		}
		s.owner = owner
		if rc != nil && s.run {
			s.rate = rc.bps
			s.followReader(reader)
		}
		used[s] = true
		s.wake()
		a = stop
	}
	return e
}

// refillEnd is where a sequential run's range from block a, claimed up to block stop,
// ends: the file's end when open (pace.Plan.OpenEnded), unless the block at stop is
// claimed by another range or cached: an open-ended range that went on past it would
// hold its connection paused once its own blocks are read, its bytes piling up in the
// path (several threads reading one file start a run at its second block, then read its
// first). Otherwise a window from a, whole blocks, but not over blocks another range
// claimed or the cache holds: this range would carry them again, and the link would
// bring them twice before what lies behind them. Caller holds mu.
func (fl *File) refillEnd(a, stop, window int64, open bool) int64 {
	if open {
		if stop < fl.nblocks && fl.present(stop) {
			return stop * fl.bs
		}
		return fl.size
	}
	wEnd := max(stop, fl.blockUp(a*fl.bs+window))
	for b := stop; b < wEnd; b++ {
		if fl.present(b) {
			wEnd = b
			break
		}
	}
	return min(wEnd*fl.bs, fl.size)
}

// refillCtx is what a run's refill knows of its reader: the time, its consumption rate
// (bytes/s, 0 while unknown) and its furthest point.
type refillCtx struct {
	now      time.Time
	bps      float64
	furthest int64
}

// continuation finds the bounded read-ahead range of owner's run that ends at block a
// and is still delivering, and when the reader's lead allows the wait (pace.Continue)
// moves its end to reqEnd, within its stretch (runbounds.go): the run's refill is then
// asked on that range's connection the moment its body ends, instead of on another
// connection before that, which on a TCP link starts in slow start (see
// pace.Continue). Nil when no range qualifies. Caller holds mu.
func (fl *File) continuation(owner Owner, a, reqEnd int64, rc *refillCtx) *rangeStream {
	off := a * fl.bs
	for _, s := range fl.rangeStreams {
		if s.owner != owner || !s.run || !s.bounded || s.stopped || s.reqEnd != off || s.next >= off {
			continue
		}
		if off >= s.limit {
			continue // the next stretch is another tier's: it gets a range of its own
		}
		f := pace.InFlight{FirstAt: s.firstAt, FirstOff: s.firstOff, Next: s.next, Want: s.want}
		if !pace.Continue(rc.now, fl.f.rtt.get(), fl.f.ramp.get(), rc.bps, rc.furthest, off, f) {
			return nil
		}
		reqEnd = min(reqEnd, s.limit)
		fl.f.log.Debug("range continued", "path", fl.path, "off", off, "to", reqEnd)
		s.reqEnd = max(s.reqEnd, reqEnd)
		return s
	}
	return nil
}

// truncate gives up the blocks a stream claimed that nobody waits for, keeping the block
// it is reading now. A bounded range with at most ReadThrough left is left to finish:
// those bytes are already sent or on their way, and reading them to the end is what
// returns its connection to the pool (a probe's 1 MiB range abandoned halfway would
// hold a connection idle, then lose it). Caller holds mu.
func (fl *File) truncate(s *rangeStream) {
	if s.bounded && s.reqEnd-s.next <= fl.f.opts.ReadThrough {
		return
	}
	keep := min(s.next+fl.bs, s.want) // the block on the wire
	for b := fl.blockUp(keep); b*fl.bs < s.want; b++ {
		if p := fl.pending[b]; p != nil && p.owner == s && p.waiters > 0 {
			keep = min((b+1)*fl.bs, fl.size)
		}
	}
	for b := fl.blockUp(keep); b*fl.bs < s.want; b++ {
		if p := fl.pending[b]; p != nil && p.owner == s {
			delete(fl.pending, b)
		}
	}
	s.want = keep
}

// takeSent ends s, an open-ended range that a split would now start parts beside, where
// the bytes its sender may already send end (SentTeller), rounded down to a block, and
// bounds its window to the least, so that past there the sender only trickles (a least
// window a round trip) until s reaches that end and is closed. Those bytes come whatever
// happens next, and a part that asked for them again would bring them over the link
// twice, in the second after the split, when the reader needs the link most (on the
// kernel-shaped shared link about 2 MB of a 150 or 200 MB read crossed it twice:
// BENCHMARKS, session 27). s takes the blocks up to that end (its reqEnd; assign claims
// them as for any stream), and the parts begin after. It reports whether s has blocks to
// take past its claim.
//
// Left as it is: a range whose sender is not yet allowed all it claimed (held, it would
// bring the rest a least window a round trip), and one allowed more than two parts past
// its claim (the window says what the sender may send, not what it has sent, and on a
// link that caps each connection the reader would wait on that one connection for what
// the parts bring sixteen times as fast: in a unit test the trial then saw no gain). The
// ahead is counted from s.next, which the body has read at least to, so the end is never
// past what was allowed. Caller holds mu.
func (fl *File) takeSent(s *rangeStream) bool {
	if s.sentOnly {
		return s.want < s.reqEnd
	}
	if s.bounded || s.body == nil || s.stopped {
		return false
	}
	t, ok := sourceBody[SentTeller](s.body)
	if !ok {
		return false
	}
	ahead, ok := t.Sent()
	if !ok {
		return false
	}
	end := min((s.next+ahead)/fl.bs*fl.bs, fl.size)
	if end < s.want || end >= s.reqEnd || end-s.want > 2*fl.partSize() {
		return false
	}
	t.BoundReceive(1, 0)
	s.sentOnly, s.reqEnd = true, end
	fl.f.log.Debug("range ends where its sender stops", "path", fl.path, "next", s.next, "want", s.want, "end", end)
	return s.want < s.reqEnd
}

// overlap is how many bytes of block b lie in span.
func (fl *File) overlap(b int64, span readahead.Range) int64 {
	from, to := max(span.Off, b*fl.bs), min(span.End, b*fl.bs+fl.blockLen(b))
	return max(to-from, 0)
}
