package fetch

import (
	"sync"
	"time"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/source"
)

// Cache writes happen off the fetch path. A stream hands each block to its readers first
// and queues it for the cache; a small pool of writers lands it on disk. A disk slower
// than the origin (this kind of machine writes about 300 MB/s, loopback origins deliver
// several times that) must not slow a reader that is waiting: a block somebody is waiting
// for is served and, when the queue is full, not cached. A read-ahead block nobody waits
// for yet must land, or it would be fetched again when its reader arrives: for those the
// stream waits for room in the queue, which is the backpressure that keeps read-ahead
// from outrunning the disk. A disk that takes no write at all for writeStall (stuck) ends
// that wait: blocks then go to their readers without the cache until it writes again.
//
// A block from a connection that delivers faster than Options.DirectWriteRate goes to
// disk with direct I/O (cache.PutSumDirect) while the writers are behind it. At loopback
// and LAN rates the fresh page-cache page each buffered 4 KiB needs can be what limits a
// cold read on this kind of machine (what a new page costs depends on the host's state:
// 0.4 to 2 GB/s of writes into new pages were measured), and the mount's page cache
// already holds the bytes. When buffered writes keep up they are faster than direct ones,
// which wait for the disk. Slower connections always write through the page cache: a
// direct write can wait for the file system for hundreds of milliseconds, and at playback
// rates on a long link that wait became a frozen player (cache/directio.go,
// docs/BENCHMARKS.md session 6).

// A block read from a cache that keeps it and serves it again on request (HeldBody: the
// peer tier, reading a block from the node that owns it) is not written here. Its owner
// holds it, so the cluster's caches hold each block once and add up to the cluster's
// capacity, and this node spends no write on a block a LAN hop away (on a copy from
// peers the write was a third of the reading node's CPU). Such a block lands at once: it
// goes to the readers waiting for it, and unless their reads take all of it, it is kept
// in memory for the readers of the rest (keep.go: until they have taken it, or the
// budget is wanted). When KeepBytes is spent, that block is written as any other, so its
// readers do not fetch it twice. The owner's own cache may skip a block as any cache
// does when its disk is behind; the block is then fetched again when next read. The peer
// tier's --peer-local-copy writes all.

// HeldBody is a source.Body that can tell which of its bytes a cache elsewhere holds and
// serves again on request. HeldFrom reports that every byte the body has delivered from
// off on came from such a cache; the body's reader calls it after reading those bytes.
type HeldBody interface {
	source.Body
	HeldFrom(off int64) bool
}

// ReceiveBounder is a source.Body whose connection can bound how many of the range's bytes
// wait in the kernel or travel ahead of the reader (pace.ReceiveWindow), by the window it
// advertises, and so how fast the origin may send. The fetcher bounds a sequential run's
// range at its reader's pace when it opens, at each pause for its reader, and at a claim
// that finds it ahead (rangeStream.followReader); the body follows its backlog from one
// call to the next, and asks again for the same bound as its reader reads (each block,
// and once the backlog a call found is read, so that a cap narrowed by a backlog does
// not outlive it); n <= 0 lifts the bound; the body lifts
// it when its connection is done with the range, so the next range on it starts free.
// However large the backlog, the window is not capped under least (pace.KeepUp): the
// sender keeps its reader's pace. BoundReceive reports whether it changed the window
// (false: no change was needed, or the body cannot tell).
type ReceiveBounder interface {
	source.Body
	BoundReceive(bytes, least int) bool
}

// SentTeller is a ReceiveBounder that can tell how many of the range's bytes past those its
// reader has read the sender may already send, whatever the window does next: those
// waiting unread in the kernel and those the window it advertised still allows. ok is
// false when it cannot tell (a closed body, an answer not on TCP). The kernel never
// withdraws window it advertised, so with the window then bounded to its least
// (BoundReceive(1, 0)) those bytes come, and after them the least window a round trip
// (64 KiB in 200 ms) until the range is closed (File.takeSent).
type SentTeller interface {
	ReceiveBounder
	Sent() (ahead int64, ok bool)
}

const (
	// writeQueueBlocks bounds the memory held by blocks waiting for the cache disk: 64
	// blocks of 256 KiB is 16 MiB, a fraction of the RAM budget of a mount.
	writeQueueBlocks = 64
	// maxWriters: two writers keep one core writing while the other serves reads.
	maxWriters = 2
	// writeStall is how long writers may take no queued write before the cache disk is
	// taken as stuck (a hung network mount, a dying disk): streams then hand blocks to
	// their readers without the cache instead of waiting for room in the queue, and
	// Close stops waiting for the queued writes. A disk that is only slow frees room
	// every few milliseconds, or a second or two under writeback throttling, far within it;
	// without the bound, a stuck disk held every read that needed a stream's next block.
	writeStall = 5 * time.Second

	// directMinBytes is how much a stream must have delivered before its rate counts
	// against Options.DirectWriteRate: an estimate from the first few blocks measures
	// the socket's buffer, not the link.
	directMinBytes = 4 << 20
	// directBacklog is the write queue's length from which a fast stream's blocks go
	// direct: a quarter of it, 4 MiB, means the writers are falling behind the origin.
	directBacklog = writeQueueBlocks / 4
)

type writeJob struct {
	fl     *File
	b      int64
	p      *pending
	direct bool // write with direct I/O (the stream delivered at DirectWriteRate or more)
}

// queueWrite queues block b of fl (landed in p) for the cache. When the queue is full it
// waits for room if mustLand, unless the disk is stuck (writesStuck); otherwise, or
// then, it drops the block from the pending map at once (landed keeps it for its reader
// if memory allows; else a reader fetches it again).
func (f *Fetcher) queueWrite(fl *File, b int64, p *pending, mustLand, direct bool) {
	f.wmu.Lock()
	for mustLand && !f.closed && len(f.writes) >= writeQueueBlocks && !f.writesStuck(time.Now()) {
		f.waitWrites(&f.wspace)
	}
	if f.closed || len(f.writes) >= writeQueueBlocks {
		closed := f.closed
		if !closed && !f.stuck && f.writesStuck(time.Now()) {
			f.stuck = true
			f.log.Warn("cache disk stuck: no write finished in "+f.writeStall.String()+"; reads go on without caching until it answers", "path", fl.path)
		}
		f.wmu.Unlock()
		if !closed {
			f.stats.cacheSkipped.Add(1)
		}
		fl.landed(b, p)
		return
	}
	f.writes = append(f.writes, writeJob{fl, b, p, direct})
	fl.queuedWrites++
	if f.writers < maxWriters {
		if f.writers == 0 {
			f.taken = time.Now() // an idle queue is not a stuck one
		}
		f.writers++
		go f.writeLoop()
	}
	f.wmu.Unlock()
}

// writesStuck reports writers running that have taken no queued write for writeStall.
// Caller holds wmu.
func (f *Fetcher) writesStuck(now time.Time) bool {
	return f.writers > 0 && now.Sub(f.taken) >= f.writeStall
}

// waitWrites waits on c (wspace or wdone) until it is signalled, or until writesStuck
// would turn true if no write is taken meanwhile. Caller holds wmu.
func (f *Fetcher) waitWrites(c *sync.Cond) {
	t := time.AfterFunc(f.writeStall-time.Since(f.taken), func() {
		f.wmu.Lock()
		c.Broadcast()
		f.wmu.Unlock()
	})
	c.Wait()
	t.Stop()
}

// writeLoop writes queued blocks until the queue is empty, then exits.
func (f *Fetcher) writeLoop() {
	for {
		f.wmu.Lock()
		if len(f.writes) == 0 {
			f.writers--
			if f.writers == 0 {
				f.wdone.Broadcast()
			}
			f.wmu.Unlock()
			return
		}
		j := f.writes[0]
		f.writes[0] = writeJob{}
		f.writes = f.writes[1:]
		// Direct only while the disk is behind the origin: when buffered writes keep up
		// (the host hands out fresh pages cheaply), they are the faster way.
		j.direct = f.opts.ForceDirectWrites || j.direct && len(f.writes) >= directBacklog
		f.taken = time.Now()
		if f.stuck {
			f.stuck = false
			f.log.Info("cache disk writing again", "queued", len(f.writes))
		}
		f.wspace.Signal()
		f.wmu.Unlock()

		if j.p.read.Load() && f.congested() {
			// The reader has these bytes; landing them would only hold back blocks that
			// nobody has yet. The cache misses this block, the reader never waited.
			f.stats.cacheSkipped.Add(1)
		} else if err := j.fl.putBlock(j.b, j.p, j.direct); err != nil {
			f.stats.cacheWriteErr.Add(1)
			f.log.Debug("cache write failed; block served from memory only", "path", j.fl.path, "block", j.b, "err", err)
		}
		j.fl.landed(j.b, j.p)
		f.wrote(j.fl)
	}
}

// wrote notes that one of fl's queued writes has landed; the last one of a released
// File lets an Open of its key go on (see Fetcher.Open).
func (f *Fetcher) wrote(fl *File) {
	f.wmu.Lock()
	fl.queuedWrites--
	done := fl.queuedWrites == 0 && fl.drained != nil
	if done {
		fl.shutDrained()
	}
	f.wmu.Unlock()
	if done {
		f.mu.Lock()
		if f.draining[fl.id] == fl {
			delete(f.draining, fl.id)
		}
		f.mu.Unlock()
	}
}

// shutDrained closes drained once. Caller holds Fetcher.wmu.
func (fl *File) shutDrained() {
	if !fl.drainedShut {
		fl.drainedShut = true
		close(fl.drained)
	}
}

// sumStore is implemented by stores that take a block's checksum from the caller
// (*cache.Cache). A stream computes it piece by piece as the bytes arrive, while they are
// still in the CPU cache, instead of the store making one more pass over the block from
// memory. The store records it unchecked, so bytes that changed after they arrived
// would read back as a miss, never as wrong bytes.
type sumStore interface {
	PutSum(key cache.FileKey, block int64, data []byte, sum uint32) error
	// PutSumDirect is PutSum asking for direct I/O (the bytes arrive fast; see above).
	PutSumDirect(key cache.FileKey, block int64, data []byte, sum uint32) error
}

var _ sumStore = (*cache.Cache)(nil)

// congested reports a write queue more than half full: the disk is behind the origin.
func (f *Fetcher) congested() bool {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	return len(f.writes) > writeQueueBlocks/2
}

// putBlock writes block b to the cache unless the object changed. Holding putMu across
// the check and the write orders it against dropCache: a write that began before the
// change lands before the old blocks are forgotten, never after (where a File for the
// new version, under the same key, could read it). A store that takes checksums gets
// the one the stream computed as the bytes arrived (sumStore), and direct I/O if direct.
func (fl *File) putBlock(b int64, p *pending, direct bool) error {
	fl.putMu.Lock()
	defer fl.putMu.Unlock()
	if fl.isFailed() {
		return nil // a changed object's old bytes must not land under its key
	}
	fence := fl.f.fence(fl.id)
	if !fence.enter(fl.id, fl.gen) {
		return nil // a File of another version took the key: these bytes are not its
	}
	defer fence.leave()
	switch {
	case fl.f.sums != nil && direct:
		return fl.f.sums.PutSumDirect(fl.key, b, p.data, p.buf.sum)
	case fl.f.sums != nil:
		return fl.f.sums.PutSum(fl.key, b, p.data, p.buf.sum)
	}
	return fl.f.store.Put(fl.key, b, p.data)
}

// landed removes the pending entry of a block once it is in the cache (or will not be),
// keeps its bytes for a reader that has not had them yet (keep.go), and lets its buffer
// go once no reader is registered on it.
func (fl *File) landed(b int64, p *pending) {
	now := time.Now()
	fl.mu.Lock()
	spent := false
	if fl.pending[b] == p {
		delete(fl.pending, b)
		_, spent = fl.keep(b, p, now, false)
	}
	p.landed = true
	p.releaseIfDone()
	fl.mu.Unlock()
	if spent {
		fl.f.sweepKept(now)
	}
}

// landHeld lands block b of p, read from a HeldBody, without writing it: it goes to its
// waiters, and unless their reads take the whole block it is kept for the readers of
// the rest (keep.go). When memory cannot keep such a block, landHeld leaves it pending
// and reports false: the caller writes it to the cache as any other block, so its
// readers do not fetch it twice.
func (fl *File) landHeld(b int64, p *pending) bool {
	now := time.Now()
	fl.mu.Lock()
	if fl.pending[b] == p && fl.err == nil && !fl.released && p.covered < int64(len(p.data)) {
		kept, spent := fl.keep(b, p, now, true)
		if !kept {
			fl.mu.Unlock()
			if spent {
				fl.f.sweepKept(now)
			}
			return false
		}
	}
	if fl.pending[b] == p {
		delete(fl.pending, b)
	}
	p.landed = true
	p.releaseIfDone()
	fl.mu.Unlock()
	return true
}
