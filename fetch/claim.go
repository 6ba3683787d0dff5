package fetch

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/playhead/playhead/readahead"
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
	landed  bool        // written to the cache or skipped (writer.go); guarded by File.mu
	read    atomic.Bool // a reader has had the bytes (see writer.go)
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
	return fl.f.store.Has(fl.key, b)
}

// schedule claims the missing blocks that [first, end) and the decision ask for, and
// returns the pending entries of [first, end) (nil for blocks believed cached), each with
// the caller registered as a waiter. With policy false the decision is ignored.
// For a sequential read it also returns the reader's run state and the time the
// read was registered in it (ownerState.inflight), for the caller to remove when done.
func (fl *File) schedule(owner Owner, dec readahead.Decision, first, end int64, policy bool) ([]*pending, *ownerState, time.Time, error) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.err != nil {
		return nil, nil, time.Time{}, fl.err
	}
	tFirst, tEnd := first, end
	sequential := false
	if policy {
		if r := dec.Fetch; r.End > r.Off {
			tFirst = min(tFirst, r.Off/fl.bs)
			tEnd = max(tEnd, fl.blockUp(r.End))
		}
		if r := dec.Ahead; r.End > r.Off {
			tEnd = max(tEnd, fl.blockUp(r.End))
			sequential = true
		}
	}
	window := dec.Ahead.Len()
	var st *ownerState
	if sequential {
		if len(fl.owners) > maxOwners {
			clear(fl.owners) // readers come and go; a fresh estimate costs a quarter second
		}
		st = fl.owners[owner]
		if st == nil {
			st = &ownerState{}
			fl.owners[owner] = st
		}
		progress := dec.Ahead.Off
		if dec.New {
			// The estimate starts past the first megabyte (see rateFrom).
			progress = max(progress, dec.Fetch.Off+rateFrom)
		}
		now := time.Now()
		lead := fl.f.lead(st.rate.observe(now, progress, st.stalled(now), st.stallEnd))
		if n := int64(fl.split.n); n > 1 {
			// Parallel parts need a window that holds them all, or the splitter would
			// judge n streams while fewer run. partSize keeps n parts within maxLead,
			// so a trial that is judged a loss leaves at most that much in flight.
			lead = max(lead, n*fl.partSize())
		}
		window = max(window, lead)
		requested := st.scanned*fl.bs - dec.Ahead.Off
		bounded := window < fl.f.opts.OpenEndedWindow && fl.split.n <= 1
		if bounded && requested >= max(lead, dec.Ahead.Len()/refillAt) {
			// Enough is requested ahead: claim only what this read needs. Refilling
			// bounded ranges only below the low-water mark keeps them large (one
			// round trip each) and leaves a slow reader that seeks away with at most
			// its first window in flight. An open-ended stream is exempt (extending
			// it costs no request), and so is split read-ahead, whose parts are
			// large already (see the tail rule below).
			tEnd = min(tEnd, max(end, fl.blockUp(dec.Fetch.End)))
		} else {
			tEnd = max(tEnd, fl.blockUp(dec.Ahead.Off+lead))
			if bounded && fl.busyRange(owner, time.Now()) {
				// The refill waits for the range in flight to near its end (busyRange).
				tEnd = min(tEnd, max(end, fl.blockUp(dec.Fetch.End)))
			}
		}
	}
	tEnd = min(tEnd, fl.nblocks)

	var abandoned []int
	if policy {
		abandoned = append(abandoned, dec.Dropped...)
		if dec.Superseded >= 0 && dec.Superseded != dec.Run {
			abandoned = append(abandoned, dec.Superseded)
		}
	}
	now := time.Now()
	for b := first; b < end; b++ {
		if f, ok := fl.failed[b]; ok {
			if f.demanded && now.Before(f.until) && !fl.present(b) {
				return nil, nil, time.Time{}, f.err
			}
			delete(fl.failed, b)
		}
	}
	if sequential && fl.f.opts.MaxParallel > 1 {
		was := fl.split.n
		if dec.New && dec.Superseded >= 0 {
			fl.split.restart()
		}
		// Alone: no other file is open. Counting streams instead read eight players as
		// alone whenever the others' bounded ranges had just finished (a split trial on
		// the far link, 123 freezes in one trial of the streams scenario).
		solo := fl.f.openFiles.Load() <= 1
		fl.split.update(now, fl.f.rtt.get(), fl.f.delivered.Load(), fl.delivered.Load(), fl.starved.Load(), fl.f.opts.MaxParallel, solo)
		if fl.split.n != was && was != 0 {
			// Info: a change of stream count is rare (a trial, its verdict) and it
			// changes what the link carries for every reader of the mount.
			fl.f.log.Info("read-ahead streams", "path", fl.path, "from", was, "to", fl.split.n,
				"open_files", fl.f.openFiles.Load(), "starved_intervals", fl.split.starvedRuns)
		}
	}
	split := sequential && fl.split.n > 1
	minPart := max(min(fl.partSize(), window/refillAt)/fl.bs, 1)
	used := map[*rangeStream]bool{}
	for b := tFirst; b < tEnd; {
		if st != nil && b >= end && b < st.scanned {
			// Read-ahead below this owner's mark was claimed by an earlier read: skip
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
			// The window's tail grows a block per read; split read-ahead waits until a
			// whole part (or half the window, if that is less) is missing rather than
			// open a range per block.
			tEnd = b
			break
		}
		if upto := fl.assign(owner, b, e, sequential, window, used); upto < e {
			tEnd = upto // no stream free for the rest: the next read assigns it
			break
		}
		b = e
	}
	if st != nil {
		st.scanned = max(st.scanned, tEnd)
	}
	if len(abandoned) > 0 {
		for _, s := range fl.rangeStreams {
			if s.owner.Handle == owner.Handle && !used[s] && slices.Contains(abandoned, s.owner.Run) {
				fl.truncate(s)
			}
		}
	}

	waits := make([]*pending, end-first)
	for b := first; b < end; b++ {
		if p := fl.pending[b]; p != nil {
			p.waiters++
			waits[b-first] = p
		}
	}
	var at time.Time
	if st != nil {
		at = time.Now()
		st.inflight = append(st.inflight, at)
	}
	return waits, st, at, nil
}

// recentlyFailed reports a block whose fetch failed within failMemory: read-ahead does
// not claim it again. Caller holds mu.
func (fl *File) recentlyFailed(b int64, now time.Time) bool {
	f, ok := fl.failed[b]
	return ok && now.Before(f.until)
}

// assign claims the missing run [a, e) for a stream: an existing one that will reach it
// within read-through distance, else a new one. Caller holds mu.
// window is the read-ahead window's size: until it reaches OpenEndedWindow a sequential
// stream is a bounded range of that size, so a reader that seeks away after a few
// megabytes leaves at most a window in flight, not whatever the path between us and the
// origin buffers (a bandwidth-delay product or more) behind an open-ended range.
// It returns the first block it could not assign (e when all were).
func (fl *File) assign(owner Owner, a, e int64, sequential bool, window int64, used map[*rangeStream]bool) int64 {
	split := sequential && fl.split.n > 1
	partBlocks := max(fl.partSize()/fl.bs, 1)
	for a < e {
		stop := e
		if split {
			stop = min(e, a+partBlocks)
		}
		s := fl.rangeStreamFor(a)
		if split && s != nil && s.want-s.next >= fl.partSize() && fl.activeRangeStreams() < fl.split.n {
			s = nil // that stream has a part queued already: start another range beside it
		}
		if s == nil {
			if split && fl.activeRangeStreams() >= fl.split.n {
				return a // the rest waits for a stream to finish its part
			}
			reqEnd, bounded := fl.size, true
			switch {
			case !sequential || split:
				reqEnd = min(stop*fl.bs, fl.size)
			case window < fl.f.opts.OpenEndedWindow:
				// A window from a, whole blocks, but not over blocks another range
				// claimed or the cache holds: this range would carry them again, and the
				// link would bring them twice before what lies behind them.
				wEnd := max(stop, fl.blockUp(a*fl.bs+window))
				for b := stop; b < wEnd; b++ {
					if fl.present(b) {
						wEnd = b
						break
					}
				}
				reqEnd = min(wEnd*fl.bs, fl.size)
			default:
				bounded = false
			}
			s = fl.startRangeStream(owner, a*fl.bs, reqEnd, bounded)
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
		used[s] = true
		s.wake()
		a = stop
	}
	return e
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
