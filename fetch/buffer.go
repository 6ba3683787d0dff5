package fetch

import (
	"sync"
	"sync/atomic"
)

// Block buffers: every block the scheduler holds in memory (fetched from the origin, or
// read back from the cache for a reader) lives in a buffer of BlockSize bytes taken from
// the Fetcher's pool and returned to it when its last user lets go. A cold read on
// loopback moves a block every few hundred microseconds; allocating each one cost a
// zeroing pass over it and a garbage collection every few hundred megabytes, about a
// tenth of the daemon's CPU.
//
// A buffer is reference counted. Its users:
//   - the stream reading it from the body (the first reference, handed to the pending
//     entry by deliver, or dropped when nobody wants the block);
//   - the pending entry, until the block has landed (written to the cache, skipped, or
//     held elsewhere) and no reader is registered on it any more (releaseIfDone);
//   - a kept entry (keep.go), until a reader takes it over or it is let go;
//   - every reader that got the block: wait takes a reference under File.mu while the
//     pending entry still holds one, and the reader drops it when it has copied the
//     bytes, or, through a View, when the kernel has them;
//   - a kept entry (keep.go), from the block's landing until its first reader takes the
//     reference over or the entry is let go.
//
// A reference that is never dropped only costs the pool a buffer (the garbage collector
// frees it); a reference dropped twice would hand a buffer in use to the next block, so
// unref panics rather than let that happen silently.

// blockBuf is one pooled block buffer.
type blockBuf struct {
	b    []byte // BlockSize bytes
	sum  uint32 // cache.Checksum of the block read into b, when the store takes it (writer.go)
	held bool   // the block's bytes came from a cache that keeps them (HeldBody): not cached here
	refs atomic.Int32
	pool *bufPool
}

// bufPool is a pool of block buffers of one size.
type bufPool struct {
	pool sync.Pool
	out  atomic.Int64 // buffers taken and not yet returned (tests check it drops to 0)
	// poison, set by tests before use, overwrites every returned buffer, so a reader
	// still using one after its last reference went sees garbage instead of the bytes.
	poison bool
}

func newBufPool(size int64) *bufPool {
	p := &bufPool{}
	p.pool.New = func() any { return &blockBuf{b: make([]byte, size), pool: p} }
	return p
}

// get takes a buffer with one reference, the caller's.
func (p *bufPool) get() *blockBuf {
	bb := p.pool.Get().(*blockBuf)
	bb.refs.Store(1)
	p.out.Add(1)
	return bb
}

// getBuf takes a block buffer with one reference, the caller's.
func (f *Fetcher) getBuf() *blockBuf { return f.bufs.get() }

func (bb *blockBuf) ref() { bb.refs.Add(1) }

// unref drops one reference; the last one returns the buffer to its pool.
func (bb *blockBuf) unref() {
	switch n := bb.refs.Add(-1); {
	case n == 0:
		if bb.pool.poison {
			for i := range bb.b {
				bb.b[i] = 0xdb
			}
		}
		bb.pool.out.Add(-1)
		bb.pool.pool.Put(bb)
	case n < 0:
		panic("fetch: block buffer released more often than referenced")
	}
}

// releaseIfDone drops the pending entry's reference to its buffer once the block has
// landed and no reader is registered on it: nobody can reach it through p any more.
// Caller holds fl.mu.
func (p *pending) releaseIfDone() {
	if p.landed && p.waiters <= 0 && p.buf != nil {
		p.buf.unref()
		p.buf, p.data = nil, nil
	}
}

// View is the bytes of one read as slices of block buffers lent by the scheduler, so the
// FUSE edge can hand them to the kernel without copying them first. The slices are valid
// until Release, which must be called exactly once.
type View struct {
	Slices [][]byte
	bufs   []*blockBuf
	n      int
}

// Len is the number of bytes in the view.
func (v *View) Len() int { return v.n }

// CopyTo copies the view's bytes into p and returns how many it copied.
func (v *View) CopyTo(p []byte) int {
	n := 0
	for _, s := range v.Slices {
		n += copy(p[n:], s)
	}
	return n
}

// Release returns the view's buffers; the slices must not be used after it.
func (v *View) Release() {
	for i, bb := range v.bufs {
		bb.unref()
		v.bufs[i] = nil
	}
	v.bufs, v.Slices, v.n = nil, nil, 0
}

func (v *View) add(bb *blockBuf, s []byte) {
	v.bufs = append(v.bufs, bb)
	v.Slices = append(v.Slices, s)
	v.n += len(s)
}
