package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/playhead/playhead/readahead"
)

// Serving reads: a read waits on the blocks it claimed (claim.go), takes what the cache
// holds, and claims again what vanished in between.

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
	defer fl.f.observeRead(time.Now(), &v)
	if err := fl.revalidate(ctx); err != nil {
		return v, err
	}
	end := min(off+int64(n), fl.size)
	first, last := off/fl.bs, (end-1)/fl.bs
	waits, st, at, err := fl.schedule(owner, dec, first, last+1, true, readahead.Range{Off: off, End: end})
	if err != nil {
		return v, err
	}
	if st != nil {
		defer func() {
			fl.mu.Lock()
			st.pace.End(at, time.Now())
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
		bb, data, err := fl.block(ctx, owner, b, waits[b-first], to-from)
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
	if next != nil && next.owner.tail {
		// A tail asked for beside this very read (tail.go): it answers when the read's
		// own range does, and it is not what this reader reads next.
		next = nil
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

// block returns block b, of which the caller reads n bytes, with a reference to its
// buffer for the caller: from the fetch it waited on (w), else from the cache, else by
// claiming it again.
func (fl *File) block(ctx context.Context, owner Owner, b int64, w *pending, n int64) (*blockBuf, []byte, error) {
	for attempt := 0; ; attempt++ {
		if w != nil {
			bb, data, err := fl.wait(ctx, w)
			if err == nil {
				fl.f.stats.blocksWaited.Add(1)
				fl.f.opts.Observer.BlockRead(TierFetch)
				return bb, data, nil
			}
			if !errors.Is(err, errRetryBlock) {
				return nil, nil, err
			}
		} else {
			// A File whose object changed keeps nothing (keep.go): a kept block is
			// this version's. Nothing is kept anywhere while the count is zero (an
			// entry's bytes are counted before it is added): a cached read then takes
			// no lock for it.
			var bb *blockBuf
			var data []byte
			kept := false
			if fl.f.keptBytes.Load() > 0 {
				fl.mu.Lock()
				bb, data, kept = fl.takeKept(b, n)
				fl.mu.Unlock()
			}
			if kept {
				fl.f.stats.blocksWaited.Add(1)
				fl.f.stats.blocksKept.Add(1)
				fl.f.opts.Observer.BlockRead(TierFetch)
				return bb, data, nil
			}
			bb = fl.f.getBuf()
			if n, ok := fl.f.store.Get(ctx, fl.key, b, bb.b); ok && int64(n) == fl.blockLen(b) {
				// Once the File failed, a File of the next version may fill the same
				// key: a block read now could be the new object's.
				if err := fl.Err(); err != nil {
					bb.unref()
					return nil, nil, err
				}
				fl.f.stats.blocksCached.Add(1)
				fl.f.stats.bytesCached.Add(int64(n))
				fl.f.opts.Observer.BlockRead(TierCache)
				return bb, bb.b[:n], nil
			}
			bb.unref()
		}
		if attempt >= maxDemandAttempts {
			return nil, nil, fmt.Errorf("read %q block %d: block lost %d times between fetch and read", fl.path, b, attempt)
		}
		ws, _, _, err := fl.schedule(owner, readahead.Decision{}, b, b+1, false,
			readahead.Range{Off: b * fl.bs, End: b*fl.bs + n})
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
		// Under mu with the waiter count: landed, which keeps a block nobody had
		// (keep.go), sees either this waiter or the read, never neither.
		w.read.Store(true)
	}
	w.releaseIfDone()
	fl.mu.Unlock()
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
