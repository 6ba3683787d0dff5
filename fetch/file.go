package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/readahead"
	"github.com/playhead/playhead/source"
)

// Owner names the reader a fetch works for: an open handle and the read-ahead policy's
// run id within it (readahead.Decision.Run).
type Owner struct {
	Handle uint64
	Run    int
}

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

// File is the fetch state of one version of one remote file.
type File struct {
	f       *Fetcher
	id      string
	path    string
	version source.Version // what the listing said; ETag filled once learned
	key     cache.FileKey
	size    int64
	bs      int64
	nblocks int64

	// refs is guarded by Fetcher.mu.
	refs int

	// Guarded by mu.
	mu           sync.Mutex
	pending      map[int64]*pending
	rangeStreams []*rangeStream
	err          error                 // set when the object changed; every later read fails with it
	failed       map[int64]failure     // blocks whose fetch failed recently
	split        splitter              // parallel streams for read-ahead (parallel.go)
	owners       map[Owner]*ownerState // per reader's run: rate and read-ahead mark (lead.go)

	starved atomic.Int64 // sequential reads that waited for a block in flight (parallel.go)
	// delivered counts the bytes this file's ranges delivered (its share of
	// Fetcher.delivered; parallel.go).
	delivered atomic.Int64

	// forgotten is closed once dropCache has forgotten the cached blocks of a changed
	// object; Fetcher.Open waits for it before it starts a File under the same key.
	forgotten chan struct{}
	// putMu is held across each cache write of this File and across dropCache's
	// Forget (see putBlock). Taken before mu, never while holding it.
	putMu sync.Mutex

	// cachedBefore: the cache held a validator for this object when the File started,
	// from this run or an earlier one. recheck: its blocks still have to be checked
	// against the origin before the first read (revalidate.go); recheckMu serialises
	// that check.
	cachedBefore bool
	recheck      atomic.Bool
	recheckMu    sync.Mutex
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

func newFile(f *Fetcher, id, path string, v source.Version, key cache.FileKey) *File {
	bs := f.opts.BlockSize
	fl := &File{f: f, id: id, path: path, version: v, key: key, size: v.Size, bs: bs,
		nblocks: (v.Size + bs - 1) / bs, pending: map[int64]*pending{}, failed: map[int64]failure{},
		owners: map[Owner]*ownerState{}, forgotten: make(chan struct{})}
	if meta, ok := f.store.Meta(key); ok && meta != "" {
		fl.cachedBefore = true
		if t, ok := parseMetaTime(meta); ok {
			fl.version.ModTime = t
		} else {
			fl.version.ETag = meta
		}
	}
	return fl
}

// metaTimePrefix marks a cache meta that holds the origin's Last-Modified instead of an
// ETag: what an origin without ETags, listed without usable times, has as its only
// validator. An ETag starts with a quote or W/, so the two cannot be confused.
const metaTimePrefix = "mtime "

func metaTime(t time.Time) string { return metaTimePrefix + strconv.FormatInt(t.Unix(), 10) }

func parseMetaTime(meta string) (time.Time, bool) {
	s, ok := strings.CutPrefix(meta, metaTimePrefix)
	if !ok {
		return time.Time{}, false
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	return time.Unix(sec, 0).UTC(), err == nil
}

// Size is the file's size in bytes.
func (fl *File) Size() int64 { return fl.size }

// Release drops this reference; the last one stops the file's streams.
func (fl *File) Release() { fl.f.release(fl) }

func (fl *File) isFailed() bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.err != nil
}

// blockLen is the length of block b.
func (fl *File) blockLen(b int64) int64 { return min(fl.bs, fl.size-b*fl.bs) }

// maxOwners bounds the run states one file keeps.
const maxOwners = 64

// failMemory is how long a failed block fails new reads at once. Long enough to cover
// the kernel's immediate re-read of a failed page, short enough that a user retrying
// after the origin came back is not refused.
const failMemory = 2 * time.Second

// maxDemandAttempts bounds how often a read re-claims a block that vanished between its
// claim and its copy (evicted from the cache, or found corrupt), so a cache that keeps
// losing blocks costs retries, never a loop.
const maxDemandAttempts = 4

// Read fills p with the bytes at off, after scheduling dec (the read-ahead policy's
// decision for this read; a zero Decision fetches just what the read needs). It returns
// io.EOF at or past the end and a short count only at the end of the file. Read is safe
// for concurrent use.
func (fl *File) Read(ctx context.Context, p []byte, off int64, owner Owner, dec readahead.Decision) (int, error) {
	v, err := fl.ReadView(ctx, off, len(p), owner, dec)
	n := v.CopyTo(p)
	v.Release()
	return n, err
}

// ReadView is Read without the copy: it returns the n bytes at off as a View of the
// scheduler's block buffers, which the caller must Release. Like Read, it returns io.EOF
// at or past the end, and a short view only at the end of the file (with io.EOF); on
// another error the view holds the blocks before the failed one.
func (fl *File) ReadView(ctx context.Context, off int64, n int, owner Owner, dec readahead.Decision) (View, error) {
	var v View
	if off < 0 {
		return v, fmt.Errorf("read %q: negative offset %d", fl.path, off)
	}
	if off >= fl.size {
		return v, io.EOF
	}
	if n <= 0 {
		return v, nil
	}
	if err := fl.revalidate(ctx); err != nil {
		return v, err
	}
	end := min(off+int64(n), fl.size)
	first, last := off/fl.bs, (end-1)/fl.bs
	waits, st, at, err := fl.schedule(owner, dec, first, last+1, true)
	if err != nil {
		return v, err
	}
	if st != nil {
		defer func() {
			fl.mu.Lock()
			st.done(at)
			fl.mu.Unlock()
		}()
	}
	if dec.New || dec.Skip {
		fl.awaitFollowing(ctx, waits, last+1, min(last+1+followingBlocks, fl.nblocks))
	}
	starved := false
	for b := first; b <= last; b++ {
		from := max(off-b*fl.bs, 0)
		to := min(end-b*fl.bs, fl.blockLen(b))
		if w := waits[b-first]; w != nil && !starved && dec.Ahead.Len() > 0 && !dec.New && !isDone(w) {
			starved = true // a sequential reader caught up with its read-ahead
			fl.starved.Add(1)
		}
		bb, data, err := fl.block(ctx, owner, b, waits[b-first])
		if err != nil {
			// Release the claims we still hold on later blocks.
			fl.dropWaits(waits[b-first+1:])
			return v, err
		}
		v.add(bb, data[from:to])
	}
	if v.Len() < n {
		return v, io.EOF
	}
	return v, nil
}

// awaitFollowing holds a read whose blocks are at hand until the first block fetched
// behind it, within [from, to), arrives, when that block's range has not answered yet;
// at most followingWait. A seek (or a skip forward within a run) that lands just
// before the end of blocks cached by an earlier visit is answered at once, and the
// player starts its clock; the first missing block behind the cached run is a round
// trip away, and with a short run the player freezes there (the bench's seek 7 froze
// 38 ms in every trial: a skip within the run's slack onto 0.9 MB of cached blocks,
// the kernel's read-ahead asking for the missing block with the last cached one).
// Waiting here moves that round trip into the read the player expects to wait for.
// Only the first read after a seek or skip waits: a sequential reader's refill is its
// read-ahead running thin, and holding a read at hand would only freeze it sooner.
//
// The same holds when the read's blocks come from a range already on the wire (an
// earlier visit's read-ahead reading through): those arrive within milliseconds, and the
// first block of a range opened for this read is a round trip away.
func (fl *File) awaitFollowing(ctx context.Context, waits []*pending, from, to int64) {
	fl.mu.Lock()
	var next *pending
	for b := from; b < to && next == nil; b++ {
		next = fl.pending[b]
	}
	if next != nil && (next.owner == nil || !next.owner.firstAt.IsZero()) {
		next = nil // its range is delivering: it comes at the link's speed, not a round trip
	}
	if next != nil {
		for _, w := range waits {
			if w != nil && !isDone(w) && w.owner == next.owner {
				next = nil // the same range brings it right behind this read's blocks
				break
			}
		}
	}
	fl.mu.Unlock()
	if next == nil {
		return
	}
	t := time.NewTimer(followingWait)
	defer t.Stop()
	select {
	case <-next.done:
	case <-ctx.Done():
	case <-t.C:
	}
}

const (
	// followingBlocks is how far behind a read awaitFollowing looks, in blocks: 1 MiB
	// of the default 256 KiB blocks, what a 3 MB/s player plays in a third of a second,
	// so a cached run longer than that outlasts the round trip by itself.
	followingBlocks = 4
	// followingWait bounds awaitFollowing: a read already at hand never waits longer for
	// blocks it does not need.
	followingWait = time.Second
)

// block returns block b, with a reference to its buffer for the caller: from the fetch
// it waited on (w), else from the cache, else by claiming it again.
func (fl *File) block(ctx context.Context, owner Owner, b int64, w *pending) (*blockBuf, []byte, error) {
	for attempt := 0; ; attempt++ {
		if w != nil {
			bb, data, err := fl.wait(ctx, w)
			if err == nil {
				fl.f.stats.blocksWaited.Add(1)
				return bb, data, nil
			}
			if !errors.Is(err, errRetryBlock) {
				return nil, nil, err
			}
		} else {
			bb := fl.f.getBuf()
			if n, ok := fl.f.store.Get(fl.key, b, bb.b); ok && int64(n) == fl.blockLen(b) {
				fl.f.stats.blocksCached.Add(1)
				return bb, bb.b[:n], nil
			}
			bb.unref()
		}
		if attempt >= maxDemandAttempts {
			return nil, nil, fmt.Errorf("read %q block %d: block lost %d times between fetch and read", fl.path, b, attempt)
		}
		ws, _, _, err := fl.schedule(owner, readahead.Decision{}, b, b+1, false)
		if err != nil {
			return nil, nil, err
		}
		w = ws[0]
	}
}

// errRetryBlock tells a waiter that its block was given up without error (the stream
// was stopped) and should be claimed again.
var errRetryBlock = errors.New("block fetch abandoned")

// wait waits for w and returns its block with a reference for the caller, or its error.
func (fl *File) wait(ctx context.Context, w *pending) (*blockBuf, []byte, error) {
	select {
	case <-w.done:
	case <-ctx.Done():
		fl.dropWaits([]*pending{w})
		return nil, nil, ctx.Err()
	}
	fl.mu.Lock()
	w.waiters--
	bb, data, err := w.buf, w.data, w.err
	if err == nil {
		bb.ref() // while the entry still holds its own: it drops it below at the earliest
	}
	w.releaseIfDone()
	fl.mu.Unlock()
	if err == nil {
		w.read.Store(true)
	}
	return bb, data, err
}

func isDone(w *pending) bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func (fl *File) dropWaits(ws []*pending) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, w := range ws {
		if w != nil {
			w.waiters--
			w.releaseIfDone()
		}
	}
}

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

func (fl *File) blockUp(off int64) int64 { return (off + fl.bs - 1) / fl.bs }

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

// rangeStreamFor finds an open stream that will deliver offset of block a soon: its next byte
// is at or before it and it is at most ReadThrough past what the stream reads anyway.
func (fl *File) rangeStreamFor(a int64) *rangeStream {
	off := a * fl.bs
	var best *rangeStream
	for _, s := range fl.rangeStreams {
		if s.stopped || s.next > off || off >= s.reqEnd || off > s.want+fl.f.opts.ReadThrough {
			continue
		}
		if best == nil || s.next > best.next {
			best = s
		}
	}
	return best
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

// finishRangeStream completes every block s still claims with err and removes s.
// errRetryBlock makes waiters claim the block again. Caller holds mu.
func (fl *File) finishRangeStream(s *rangeStream, err error) {
	for b, p := range fl.pending {
		if p.owner == s {
			p.err = err
			close(p.done)
			delete(fl.pending, b)
			if !errors.Is(err, errRetryBlock) {
				fl.failed[b] = failure{err: err, until: time.Now().Add(failMemory), demanded: p.waiters > 0}
				if p.waiters > 0 {
					fl.f.stats.failures.Add(1)
				}
			}
		}
	}
	fl.removeRangeStream(s)
}

func (fl *File) removeRangeStream(s *rangeStream) {
	s.stopped = true
	for i, o := range fl.rangeStreams {
		if o == s {
			fl.rangeStreams = append(fl.rangeStreams[:i], fl.rangeStreams[i+1:]...)
			break
		}
	}
}

// changed records that the origin object is no longer this version: every read of this
// File fails from now on. It reports whether this was the first report, in which case
// the caller must call dropCache after releasing mu. Caller holds mu.
func (fl *File) changed(err error) (first bool) {
	if fl.err != nil {
		return false
	}
	fl.err = err
	return true
}

// dropCache forgets the cached blocks of a changed object. Call without mu: it deletes
// files, and every reader and stream of the file waits on mu.
func (fl *File) dropCache(err error) {
	defer close(fl.forgotten)
	fl.putMu.Lock() // a write in flight lands first, and is forgotten with the rest
	defer fl.putMu.Unlock()
	if ferr := fl.f.store.Forget(fl.key); ferr != nil {
		fl.f.log.Warn("cannot drop cached blocks of changed object", "path", fl.path, "err", ferr)
	}
	fl.f.log.Warn("object changed at origin; its cached blocks are dropped", "path", fl.path, "err", err)
}

// learnETag checks the origin's validators against what we know, learns the ETag and
// modification time if the listing did not give them, and records the ETag (or, without
// one, the time) beside the cached blocks so a restart can tell the blocks belong to
// this object.
// It returns an error wrapping source.ErrChanged on a mismatch.
func (fl *File) learnETag(v source.Version) error {
	fl.mu.Lock()
	if !fl.version.Matches(v) {
		fl.mu.Unlock()
		return &source.PathError{Op: "read", Path: fl.path, Off: -1,
			Err: fmt.Errorf("%w: expected %v, origin has %v", source.ErrChanged, fl.version, v)}
	}
	var meta string // the validator to record beside the cached blocks, if learned now
	if fl.version.ETag == "" && v.ETag != "" {
		fl.version.ETag = v.ETag
		meta = v.ETag
	}
	if fl.version.ModTime.IsZero() && !v.ModTime.IsZero() {
		// A listing without usable times (nginx's HTML) and an origin without ETags:
		// the time the first answer gave is then the only validator, and without it
		// the next ranges would be unconditional and a same-size replacement would mix
		// old and new bytes in one handle. The cache key has no time then, so the time
		// is recorded too, or after a restart the blocks would pass for any version.
		fl.version.ModTime = v.ModTime
		if fl.version.ETag == "" {
			meta = metaTime(v.ModTime)
		}
	}
	fl.mu.Unlock()
	if meta != "" { // written outside mu: it is file I/O
		if err := fl.f.store.SetMeta(fl.key, meta); err != nil {
			fl.f.log.Debug("cannot record validator in cache", "path", fl.path, "err", err)
		}
	}
	// The origin has just vouched for this object: no revalidation needed this run.
	fl.recheck.Store(false)
	fl.f.confirmed.Add(fl.id, time.Now())
	return nil
}

func (fl *File) stopRangeStreams() {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, s := range fl.rangeStreams {
		s.stopped = true
		s.wake()
	}
	for b, p := range fl.pending {
		if p.waiters == 0 {
			delete(fl.pending, b)
		}
	}
}
