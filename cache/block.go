package cache

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"syscall"
	"time"
)

// Reading and writing one block: Get, Put, and retiring a block found bad. See the
// package doc for why each step is in the order it is.

// errDstShort: the caller's buffer cannot hold the block (a miss, not a corruption).
var errDstShort = errors.New("destination buffer too short")

// Get copies block `block` of key into dst and returns its length. dst must hold
// BlockSize bytes (a last, short block needs only its length). ok is false on a miss,
// and on a bad block, which is then removed and counted Corrupt. Get does not allocate
// and holds no lock during I/O. It does not heed ctx: a read of the local disk is short,
// and a block already at hand is worth more to a caller than a miss.
func (c *Cache) Get(ctx context.Context, key FileKey, block int64, dst []byte) (n int, ok bool) {
	if c.closed.Load() {
		c.misses.Add(1)
		return 0, false
	}
	now := c.now().Unix()
	c.mu.Lock()
	var e *blockEntry
	fe := c.files[key]
	if fe != nil {
		e = fe.blocks[block]
	}
	if e == nil {
		c.mu.Unlock()
		c.misses.Add(1)
		return 0, false
	}
	c.lru.moveToFront(e)
	gen, direct := e.gen, e.direct
	touch := now-e.stamp >= int64(touchInterval/time.Second)
	if touch {
		e.stamp = now
	}
	c.mu.Unlock()

	h, err := c.fds.acquire(fe, false)
	if err != nil {
		c.misses.Add(1)
		if errors.Is(err, errCorrupt) || isMissing(err) {
			c.dropDamagedDir(fe, e, gen, err)
		}
		return 0, false
	}
	r, n, err := c.readBlock(fe, h, block, dst, direct)
	if err != nil {
		c.fds.release(h)
		c.misses.Add(1)
		if errors.Is(err, errCorrupt) {
			c.dropCorrupt(fe, e, gen, err)
		}
		return 0, false
	}
	if touch {
		c.touch(fe, h, e, gen, r, now)
	}
	c.fds.release(h)
	c.hits.Add(1)
	return n, true
}

// readBlock reads and verifies block of fe into dst, the data with direct I/O if it was
// written so. Errors wrapping errCorrupt mean the record or the data is bad or missing.
func (c *Cache) readBlock(fe *fileEntry, h *fileHandles, block int64, dst []byte, direct bool) (record, int, error) {
	// The record is read into dst, then overwritten by the data: a buffer on the stack
	// would escape (crc32 dispatches through function values) and cost an allocation.
	rb := dst
	if len(rb) < recLen {
		rb = make([]byte, recLen) // a tiny last block in a tiny buffer: rare
	}
	rb = rb[:recLen]
	if err := preadFull(h.indexFd, rb, block*recLen); err != nil {
		return record{}, 0, fmt.Errorf("%w: %v block %d: record: %w", errCorrupt, fe.key, block, err)
	}
	r, err := decodeRecord(rb)
	if err == nil {
		err = r.check(fe.id, block, c.opts.BlockSize)
	}
	if err != nil {
		return r, 0, fmt.Errorf("%v block %d: %w", fe.key, block, err)
	}
	if int(r.dataLen) > len(dst) {
		return r, 0, errDstShort
	}
	off := block * c.opts.BlockSize
	data := dst[:r.dataLen]
	if err := c.readData(h, data, off, direct); err != nil {
		return r, 0, fmt.Errorf("%w: %v block %d at offset %d: %w", errCorrupt, fe.key, block, off, err)
	}
	if crc32Sum(data) != r.dataCRC {
		return r, 0, fmt.Errorf("%w: %v block %d at offset %d: data checksum mismatch", errCorrupt, fe.key, block, off)
	}
	return r, len(data), nil
}

// touch rewrites the record a Get just verified with a new last-use stamp, unless the
// block was replaced or retired since (the record on disk is then no longer r).
func (c *Cache) touch(fe *fileEntry, h *fileHandles, e *blockEntry, gen uint32, r record, now int64) {
	// A Put into this file holds fe.mu across its write, which may wait for the file
	// system (a direct write, directio.go): rather than hold a reader up, skip the
	// stamp. Only the LRU order after a restart depends on it, and the next Get retries.
	if !fe.mu.TryLock() {
		return
	}
	defer fe.mu.Unlock()
	c.mu.Lock()
	same := !fe.gone && fe.blocks[e.index] == e && e.gen == gen
	c.mu.Unlock()
	if !same {
		return
	}
	r.stamp = stampOf(now)
	var rb [recLen]byte
	r.encode(rb[:])
	// Not through c.writeAt: the record's page exists, and only LRU order at restart is
	// at stake if this fails.
	_, _ = h.index.WriteAt(rb[:], e.index*recLen)
}

// dropCorrupt retires the block a Get found bad, unless the entry was evicted or
// replaced since the Get looked it up (then the failure was a race, not corruption).
func (c *Cache) dropCorrupt(fe *fileEntry, e *blockEntry, gen uint32, reason error) {
	fe.mu.Lock()
	defer fe.mu.Unlock()
	c.mu.Lock()
	if fe.gone || fe.blocks[e.index] != e || e.gen != gen {
		c.mu.Unlock()
		return
	}
	c.removeLocked(e)
	c.mu.Unlock()
	c.corrupt.Add(1)
	c.eraseBlock(fe, e.index)
	c.log.Warn("cache: dropped a bad block", "err", reason)
}

// dropDamagedDir drops every block of fe when its data or index file is missing or not
// a regular file, unless fe was dropped, or the block evicted or replaced, since the Get
// looked it up. Every block it held counts as corrupt.
func (c *Cache) dropDamagedDir(fe *fileEntry, e *blockEntry, gen uint32, reason error) {
	fe.mu.Lock()
	c.mu.Lock()
	if fe.gone || fe.blocks[e.index] != e || e.gen != gen {
		c.mu.Unlock()
		fe.mu.Unlock()
		return
	}
	lost := len(fe.blocks)
	c.mu.Unlock()
	trash, err := c.dropDir(fe, false)
	fe.mu.Unlock()
	c.removeTrash(trash)
	c.corrupt.Add(int64(lost))
	c.log.Warn("cache: dropped a damaged key directory", "key", fe.key, "blocks", lost, "err", reason)
	if err != nil {
		c.log.Warn("cache: cannot remove a directory; Open will retry", "err", err)
	}
}

// eraseBlock retires block on disk: its record first (from then on nothing vouches for
// the data), then its data range goes back to a hole. Caller holds fe.mu.
func (c *Cache) eraseBlock(fe *fileEntry, block int64) {
	h, err := c.fds.acquire(fe, false)
	if err != nil {
		if !isMissing(err) && !errors.Is(err, errHandlesDropped) && !errors.Is(err, ErrClosed) {
			c.log.Warn("cache: cannot retire a block", "key", fe.key, "block", block, "err", err)
		}
		return
	}
	defer c.fds.release(h)
	c.clearSlot(h, block, true)
}

// clearSlot zeroes block's record (if one may have been written) and punches its data
// range. Errors are logged: a record that survives vouches for a hole, which any read
// turns into a miss.
func (c *Cache) clearSlot(h *fileHandles, block int64, record bool) {
	if record {
		if _, err := h.index.WriteAt(zeroRecord[:], block*recLen); err != nil {
			c.log.Warn("cache: cannot zero a retired block's record", "block", block, "err", err)
		}
	}
	if err := punchHole(h.dataFd, block*c.opts.BlockSize, c.opts.BlockSize); err != nil {
		if !errors.Is(err, syscall.EOPNOTSUPP) || !c.noPunch.Swap(true) {
			c.log.Warn("cache: cannot punch out a retired block's data", "block", block, "err", err)
		}
	}
}

// Put stores data (1 to BlockSize bytes) as block `block` of key, replacing any copy.
// On failure nothing is left behind, the error wraps ErrCacheFull (disk or quota full)
// or the I/O error, and the caller should serve the data from memory. A Put that races
// with Forget of the same key is dropped and returns nil.
func (c *Cache) Put(key FileKey, block int64, data []byte) error {
	return c.putSum(key, block, data, Checksum(0, data), false)
}

// Checksum extends sum, the block checksum of some bytes, by p: Checksum(0, data) is
// the checksum PutSum wants, and Checksum(Checksum(0, a), b) that of a followed by b.
func Checksum(sum uint32, p []byte) uint32 { return crc32.Update(sum, castagnoli, p) }

// PutSum is Put with the data's Checksum computed by the caller, who may have done it
// piecewise while the bytes were fresh in the CPU cache (as they arrive from the
// network), saving a pass over them. The sum goes into the block's record unchecked: a
// sum that does not match data makes the block a miss (counted Corrupt) on its first
// Get, never wrong bytes, and it also catches the data changing in between.
func (c *Cache) PutSum(key FileKey, block int64, data []byte, sum uint32) error {
	return c.putSum(key, block, data, sum, false)
}

// PutSumDirect is PutSum for a caller whose blocks arrive faster than the page cache
// takes new pages (an origin on loopback or in the same rack): the data goes to disk with
// direct I/O where the file system, the buffer and the block's size allow, and keeps
// going that way when it is read back. A direct write may wait for the file system far
// longer than a buffered one (it takes the file's lock and may wait for a journal
// commit), so a caller whose reader waits on a slow link should use PutSum (directio.go).
func (c *Cache) PutSumDirect(key FileKey, block int64, data []byte, sum uint32) error {
	return c.putSum(key, block, data, sum, true)
}

func (c *Cache) putSum(key FileKey, block int64, data []byte, sum uint32, direct bool) error {
	if c.closed.Load() {
		return fmt.Errorf("cache: put %v block %d: %w", key, block, ErrClosed)
	}
	if block < 0 || block > math.MaxInt64/c.opts.BlockSize-1 || len(data) == 0 || int64(len(data)) > c.opts.BlockSize {
		return fmt.Errorf("cache: put %v block %d: %d bytes is not a block of at most %d", key, block, len(data), c.opts.BlockSize)
	}
	ksum := key.sum()
	err := c.store(key, ksum, block, data, sum, direct)
	if isNoSpace(err) {
		c.diskFull.Add(1)
		c.shrinkAfterFull()
		err = c.store(key, ksum, block, data, sum, direct)
		if isNoSpace(err) {
			c.diskFull.Add(1)
		}
	}
	if err != nil {
		c.writeErrors.Add(1)
		off := block * c.opts.BlockSize
		if isNoSpace(err) {
			return fmt.Errorf("cache: put %v block %d at offset %d: %w: %w", key, block, off, ErrCacheFull, err)
		}
		return fmt.Errorf("cache: put %v block %d at offset %d: %w", key, block, off, err)
	}
	return nil
}

// store writes block into key's directory and indexes it. It holds the file's lock
// across the writes (ext4 serialises buffered writes to one inode anyway), but not
// across evictions: the caller may need to evict blocks of this very file and retry.
func (c *Cache) store(key FileKey, sum [32]byte, block int64, data []byte, crc uint32, direct bool) error {
	for {
		fe := c.fileFor(key, sum)
		fe.mu.Lock()
		if fe.gone {
			fe.mu.Unlock()
			if fe.forgotten {
				return nil
			}
			continue // retired by eviction after we looked it up: take the fresh entry
		}
		now := c.now()
		err := c.ensureDir(fe)
		wentDirect := false
		if err == nil {
			var h *fileHandles
			if h, err = c.fds.acquire(fe, true); err == nil {
				wentDirect, err = c.writeBlock(fe, h, block, data, crc, now, direct)
				c.fds.release(h)
			}
		}
		if err != nil {
			trash := c.abandonIfEmpty(fe)
			fe.mu.Unlock()
			c.removeTrash(trash)
			return err
		}
		c.mu.Lock()
		if c.limit < c.opts.MaxBytes && now.Sub(c.lastFull) >= fullRecovery {
			c.limit = c.opts.MaxBytes
		}
		if e := fe.blocks[block]; e != nil {
			c.bytes += int64(len(data)) - int64(e.size)
			e.size = int32(len(data))
			e.gen++ // a Get that read the old record or data is not to blame
			e.stamp = now.Unix()
			e.direct = wentDirect
			c.lru.moveToFront(e)
		} else {
			e = &blockEntry{file: fe, index: block, size: int32(len(data)), stamp: now.Unix(), direct: wentDirect}
			c.addLocked(e)
		}
		victims := c.evictLocked()
		c.mu.Unlock()
		fe.mu.Unlock()
		c.puts.Add(1)
		if wentDirect {
			c.directWrites.Add(1)
		}
		c.finishEvictions(victims)
		return nil
	}
}

// writeBlock writes block's data, then its record: until the record is written nothing
// vouches for the data. On error the slot is left empty. The data goes direct if the
// caller asks and it can (wentDirect). Caller holds fe.mu.
func (c *Cache) writeBlock(fe *fileEntry, h *fileHandles, block int64, data []byte, crc uint32, now time.Time, direct bool) (wentDirect bool, err error) {
	c.mu.Lock()
	old := fe.blocks[block]
	c.mu.Unlock()
	if old != nil {
		// The old record vouches for bytes about to be overwritten: retire it first, so
		// that a crash mid-write leaves a miss rather than a record over mixed data.
		_, err = h.index.WriteAt(zeroRecord[:], block*recLen)
	}
	recordTouched := old != nil // a record may be on disk: clear it on failure
	if err == nil {
		wentDirect, err = c.writeData(h, data, block*c.opts.BlockSize, direct)
	}
	if err == nil {
		recordTouched = true
		r := record{
			keyID:     fe.id,
			block:     uint64(block),
			blockSize: uint32(c.opts.BlockSize),
			dataLen:   uint32(len(data)),
			dataCRC:   crc,
			stamp:     stampOf(now.Unix()),
		}
		var rb [recLen]byte
		r.encode(rb[:])
		_, err = c.writeAt(h.index, rb[:], block*recLen)
	}
	if err != nil {
		// A half-written block is never visible: no record vouches for it. Punching the
		// range gives a full disk back what the failed write took.
		c.clearSlot(h, block, recordTouched)
		if old != nil {
			c.mu.Lock()
			if fe.blocks[block] == old {
				c.removeLocked(old)
			}
			c.mu.Unlock()
		}
		return false, err
	}
	return wentDirect, nil
}

// isMissing reports an open that failed because the file, or a directory on its path,
// is missing or is not what it should be.
func isMissing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}
