// Package fetch is playhead's fetch scheduler: it turns the read-ahead policy's decisions
// into range requests against a source, lands the bytes in the block cache, and hands
// them to the readers waiting for them.
//
// Design:
//   - One File per remote object version, shared by every open handle of it. Its blocks
//     are cached (in the BlockStore), pending (a range stream has claimed them and will
//     deliver them), or missing. A block is claimed by exactly one stream, so it is
//     fetched once however many readers want it; readers of a pending block wait for it.
//   - A range stream is one request to the origin read in order, block by block, nearest
//     block first. It reads its body only up to the furthest block somebody claimed for it
//     (its want) and then stops reading, so TCP flow control holds the sender; extending
//     want resumes it without a new round trip. A sequential reader's stream is opened
//     open-ended (to EOF); a random read's is bounded to the blocks asked for, so a
//     scanner's probe does not pull megabytes into socket buffers.
//   - A missing block a short way past what a stream will read anyway (ReadThrough) is
//     served by reading through that stream instead of opening a new range.
//   - A source may serve a file in stretches from different tiers (RunBounds: the peer
//     tier, each stripe from its owner). Invariant: a range stream never crosses the
//     end of the stretch it started in, whatever opened or extended it (read-ahead,
//     demand, a head read's tail, split parts, refills and continuations), so a block
//     waits only on its own tier; across nodes, a block a node owns waits only on the
//     origin and a block it asked a peer for only on that peer's origin range, which
//     is what keeps two nodes from waiting on each other (runbounds.go).
//   - How far past a reader to fetch (the lead), when a bounded run is refilled and how
//     many range streams its read-ahead is split into are decided by readahead/pace
//     from values (the clock reading, the round trip, the bytes delivered); fetch keeps
//     that state under File.mu and carries out the plan (claim.go, parallel.go).
//   - Files: read.go serves reads, claim.go keeps the pending set, rangestream.go runs
//     the range streams, tail.go fetches a file's tail beside its head read,
//     runbounds.go keeps each range within one tier's stretch, writer.go lands blocks
//     in the cache, confirm.go and pages.go detect a changed object.
//   - When the policy says a reader's run was dropped or superseded (the reader seeked
//     away), its range streams are truncated to the block on the wire plus anything
//     another reader still waits for. The connection stays open for IdleClose in case
//     the reader comes back within read-through distance.
//
// Words: a range stream (type rangeStream, "stream" for short in this package) is a
// connection to the origin; a reader's sequential run, as the read-ahead policy tracks
// it (readahead.Decision.Run), is a run.
//
// Traps:
//   - Never block on I/O while holding File.mu; stream goroutines and readers share it.
//   - A pending block always completes (data or error) or is removed with no waiters, so
//     a reader never waits forever: bodies that stall are closed after StallTimeout and
//     an origin that stays unreachable fails the claimed blocks after IOTimeout.
//
// Lock order: Fetcher.mu before Fetcher.wmu and before File.mu; File.mu is not held
// across I/O (Fetcher.mu is, briefly, for a new File's Validator and a replaced
// object's Forget). File.putMu (held across one cache write) is taken before
// File.confirmMu, both before File.mu, and a key's fence after them.
package fetch

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/source"
)

// BlockStore is what the scheduler needs of a store of blocks: the disk cache
// (*cache.Cache) today. It is kept small so that a store in memory only and a tier of
// peers can implement it too, and a read can ask them in turn before the origin.
//
// Blocks are Options.BlockSize bytes (the last of a file may be shorter), indexed from 0,
// under the cache.FileKey that Fetcher.Open builds: source, path and the version's cache
// key, so two versions of an object never share blocks. The Validator recorded beside
// them says which version of the object they are, for the check against the origin
// after a restart. All methods are safe for concurrent use; none keeps a reference to
// the caller's buffer after it returns.
//
//   - Get copies a block into dst (BlockSize bytes long) and returns its length. It never
//     returns wrong bytes: it reports ok=false on a miss, on a block that fails its check,
//     and when ctx is done before it has the block; the caller then asks the next
//     store, or the origin. A store whose reads are local and short may ignore ctx.
//   - Has answers from memory, without I/O or waiting: it is called with File.mu held. A
//     block it reports is one Get returns, unless the block is lost meanwhile (evicted,
//     or found bad), after which Has no longer reports it; a read retries a lost block
//     only maxDemandAttempts times.
//   - Put stores a copy of data. It may fail (a full disk); the bytes are then served
//     from memory to the readers waiting for them, and fetched again when read later.
//   - Forget drops every block of key and its validator: the object changed at the
//     origin. The caller orders its Puts of key before Forget (File.putMu).
//   - SetValidator records the validator of key's version; Validator returns it, with
//     ok=false if none was recorded. A store that keeps blocks across restarts keeps it
//     with them.
type BlockStore interface {
	Get(ctx context.Context, key cache.FileKey, block int64, dst []byte) (n int, ok bool)
	Has(key cache.FileKey, block int64) bool
	Put(key cache.FileKey, block int64, data []byte) error
	Forget(key cache.FileKey) error
	Validator(key cache.FileKey) (v cache.Validator, ok bool)
	SetValidator(key cache.FileKey, v cache.Validator) error
}

var _ BlockStore = (*cache.Cache)(nil)

// Warmer is implemented by sources that can prepare an idle connection in advance, so
// the next range after an abandoned one costs one round trip instead of two.
type Warmer interface {
	Warm(ctx context.Context) error
}

// Preparer is implemented by sources whose connections are capped one by one, as an
// object store caps every GET, and that can dial connections ahead of need: Prepare
// makes sure about n are open, in the background, so that n parallel ranges opened soon
// do not each wait for a handshake. It must not block: the fetcher calls it holding a
// File's lock. Such a source also gets a copy's split after a shorter baseline
// (pace.Sample.Capped); a web server behind a shared link does not implement it.
type Preparer interface {
	Prepare(n int)
}

// Stats are cumulative counters of a Fetcher.
type Stats struct {
	Requests      int64 // ranges opened at the origin
	BytesFetched  int64 // body bytes read from the origin
	Retries       int64 // ranges reopened after a transient error
	Failures      int64 // blocks failed after IOTimeout or a permanent error
	BlocksCached  int64 // blocks a reader got from the block cache
	BytesCached   int64 // bytes of those blocks (a file's last block may be short)
	BlocksWaited  int64 // blocks a reader got from a fetch in flight, or kept in memory for it (keep.go)
	BlocksKept    int64 // of those, blocks that had landed and were kept for the reader
	CacheWriteErr int64 // blocks that could not be written to the cache
	CacheSkipped  int64 // blocks not cached because the cache disk fell behind the origin
	BlocksHeld    int64 // blocks not cached because another node's cache holds them (HeldBody)
	TailRanges    int64 // ranges opened for a file's tail beside its head read (tail.go)
}

type counters struct {
	requests, bytesFetched, retries, failures          atomic.Int64
	blocksCached, blocksWaited, cacheWriteErr, handles atomic.Int64
	cacheSkipped, tailRanges, bytesCached, blocksKept  atomic.Int64
	blocksHeld                                         atomic.Int64
}

// Fetcher schedules fetches for all files of one source.
type Fetcher struct {
	src source.Source
	// preparer is src as a Preparer, or nil.
	preparer Preparer
	store    BlockStore
	opts     Options
	log      *slog.Logger
	stats    counters
	rtt      rtt     // how long the origin takes to answer a range (pace.go)
	path     pathRTT // the path's round trip: the shortest recent answer (pace.go)
	ramp     ramp    // how much longer new ranges take for their first MiB than the next: slow start (pace.go)
	// delivered counts the bytes every range of every file delivered: the split
	// controller judges the link, not one file (parallel.go).
	delivered atomic.Int64
	// openFiles is len(files), for File.schedule to read without mu: a file opened
	// alone is read alone (parallel.go).
	openFiles atomic.Int64
	bufs      *bufPool  // block buffers (buffer.go)
	sums      sumStore  // store, when it takes checksums computed by the streams (writer.go)
	bounds    RunBounds // src as a RunBounds, or nil (runbounds.go)
	// keptBytes is the memory of every File's kept blocks; keptSwept the last
	// sweepKept, Unix nanoseconds; keepTicking is set while keepTick's timer runs; keepAge
	// is how long a kept block waits (keep.go).
	keptBytes, keptSwept atomic.Int64
	keepTicking          atomic.Bool
	keepAge              time.Duration

	mu    sync.Mutex
	files map[string]*File // by cache key; guarded by mu
	// draining holds, by cache key, the released File whose cache writes were still
	// queued when it was released, until they land (wrote) or an Open that waited for
	// them gave up; guarded by mu. See Open. Writes a stream queues after the release
	// (a block that was arriving as it came) are not waited for: they cost a fetch.
	draining map[string]*File

	// confirmed holds, by File id, when the origin last vouched for that version of the
	// object during this run (an answer whose validators matched; confirm.go). Bounded:
	// a File forgotten here is checked again at its next open, which costs a HEAD and
	// never serves a wrong byte. Safe for concurrent use on its own.
	confirmed *lru.Cache[string, time.Time]

	// fences orders cache writes of a released File against the Forget of a new File of
	// the same key (keyfence.go).
	fences [fenceStripes]keyFence

	wmu     sync.Mutex
	wdone   sync.Cond  // signalled when the last writer exits; uses wmu
	wspace  sync.Cond  // signalled when a queued write is taken; uses wmu
	writes  []writeJob // blocks waiting to be written to the cache; guarded by wmu
	writers int        // writer goroutines running; guarded by wmu
	closed  bool       // no more cache writes; guarded by wmu
	// taken is when a writer last took a queued write (or started); stuck records that
	// a stuck disk was reported and not yet the end of it (writer.go). Guarded by wmu.
	taken time.Time
	stuck bool
	// writeStall is the const of that name, shorter in tests.
	writeStall time.Duration
}

// New returns a Fetcher reading from src into store. log may be nil.
func New(src source.Source, store BlockStore, opts Options, log *slog.Logger) *Fetcher {
	if log == nil {
		log = slog.Default()
	}
	f := &Fetcher{src: src, store: store, opts: opts.withDefaults(), log: log, files: map[string]*File{},
		draining: map[string]*File{}, keepAge: defaultKeepAge, writeStall: writeStall}
	f.preparer, _ = src.(Preparer)
	f.bounds, _ = src.(RunBounds)
	f.confirmed, _ = lru.New[string, time.Time](maxConfirmed) // fails only for a size <= 0
	f.bufs = newBufPool(f.opts.BlockSize)
	f.sums, _ = store.(sumStore)
	f.wdone.L = &f.wmu
	f.wspace.L = &f.wmu
	return f
}

// Close stops cache writes: queued blocks are written, later ones are not, and Close
// returns once no writer touches the store any more, so the store can be closed after it.
// A disk that has taken no write for writeStall is not waited for: Close then returns
// with writers still inside the store, which lets their writes fail once it is closed
// (a stuck disk must not hang an unmount; its blocks are misses next time).
func (f *Fetcher) Close() {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.closed = true
	f.wspace.Broadcast()
	for f.writers > 0 && !f.writesStuck(time.Now()) {
		f.waitWrites(&f.wdone)
	}
	if f.writers > 0 {
		f.log.Warn("cache disk stuck: closing without the writes still queued", "queued", len(f.writes), "since", time.Since(f.taken).Round(time.Millisecond))
	}
}

// Stats returns the counters so far.
func (f *Fetcher) Stats() Stats {
	return Stats{
		Requests:      f.stats.requests.Load(),
		BytesFetched:  f.stats.bytesFetched.Load(),
		Retries:       f.stats.retries.Load(),
		Failures:      f.stats.failures.Load(),
		BlocksCached:  f.stats.blocksCached.Load(),
		BytesCached:   f.stats.bytesCached.Load(),
		BlocksWaited:  f.stats.blocksWaited.Load(),
		BlocksKept:    f.stats.blocksKept.Load(),
		CacheWriteErr: f.stats.cacheWriteErr.Load(),
		CacheSkipped:  f.stats.cacheSkipped.Load(),
		BlocksHeld:    f.stats.blocksHeld.Load(),
		TailRanges:    f.stats.tailRanges.Load(),
	}
}

// Options returns the options in force (defaults filled in).
func (f *Fetcher) Options() Options { return f.opts }

// NewHandle returns a fresh handle id for Owner values; ids are never reused.
func (f *Fetcher) NewHandle() uint64 { return uint64(f.stats.handles.Add(1)) }

// Open returns the shared File for path at version v (v.Size must be known). Each Open
// must be paired with a Release.
func (f *Fetcher) Open(path string, v source.Version) *File {
	key := cache.FileKey{Source: f.src.String(), Path: path, Version: v.CacheKey()}
	id := key.Source + "\x00" + key.Path + "\x00" + key.Version
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		fl := f.files[id]
		if fl != nil && fl.isFailed() {
			select {
			case <-fl.forgotten:
			default:
				// The object changed under this key (same size and time) and its old
				// blocks are being forgotten: a new File started now would find them
				// in the cache, with the old ETag beside them, and serve them as its own.
				f.mu.Unlock()
				<-fl.forgotten
				f.mu.Lock()
				continue
			}
			fl = nil
		}
		if d := f.draining[id]; fl == nil && d != nil {
			// The last File of this key was released with blocks still queued for the
			// cache: they are in neither the cache nor a pending map a new File sees, so
			// a File started now would fetch them again (a player that closes a file and
			// opens it again, a scanner's probe and then the player, while the disk is
			// behind). Their writes take milliseconds; a round trip to the origin takes
			// more. Wait for them, but no longer than drainWait: a stuck disk costs
			// fetching again the blocks still queued, never a hang. The entry stays
			// while this Open waits, so that another Open of the key waits too (a
			// scanner and a player together); it goes once the writes land (wrote), or
			// here when the wait gave up.
			f.mu.Unlock()
			select {
			case <-d.drained:
			case <-time.After(drainWait):
			}
			f.mu.Lock()
			if f.draining[id] == d {
				delete(f.draining, id)
			}
			continue
		}
		if fl == nil {
			fl = newFile(f, id, path, v, key)
			_, seen := f.confirmed.Peek(id)
			fl.recheck.Store(fl.cachedBefore && !seen && !fl.listedMatch)
			f.files[id] = fl
			f.openFiles.Store(int64(len(f.files)))
		}
		fl.refs++
		return fl
	}
}

func (f *Fetcher) release(fl *File) {
	f.mu.Lock()
	fl.refs--
	last := fl.refs == 0
	current := f.files[fl.id] == fl // not an older File a newer one replaced
	if last && current {
		delete(f.files, fl.id)
		f.openFiles.Store(int64(len(f.files)))
	}
	if last {
		f.wmu.Lock()
		fl.drained = make(chan struct{})
		if fl.queuedWrites == 0 {
			fl.shutDrained()
		} else if current {
			f.draining[fl.id] = fl
		}
		f.wmu.Unlock()
	}
	f.mu.Unlock()
	if last {
		fl.stopRangeStreams()
	}
}

// drainWait bounds how long Open waits for a released File's queued cache writes (see
// Open): 64 queued blocks (writeQueueBlocks) take about 50 ms on a disk writing 300 MB/s.
const drainWait = 500 * time.Millisecond
