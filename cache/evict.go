package cache

import (
	"errors"
	"io/fs"
	"os"
)

// Index bookkeeping and eviction. The index changes under Cache.mu; the matching file
// system changes (zero the record, punch the data) happen afterwards under the file's
// fileEntry.mu, re-checking the index, because a Put may have stored the same block
// again in between.

// addLocked indexes a new block as the most recently used. Caller holds c.mu.
func (c *Cache) addLocked(e *blockEntry) {
	e.file.blocks[e.index] = e
	c.lru.pushFront(e)
	c.bytes += int64(e.size)
	c.blocks++
}

// removeLocked drops a block from the index. Caller holds c.mu.
func (c *Cache) removeLocked(e *blockEntry) {
	c.lru.remove(e)
	delete(e.file.blocks, e.index)
	c.bytes -= int64(e.size)
	c.blocks--
}

// victim is a block evicted from the index whose record and data are still on disk.
type victim struct {
	fe    *fileEntry
	index int64
}

// evictLocked drops least recently used blocks from the index until the data fits the
// effective limit, and returns them for finishEvictions. Caller holds c.mu.
func (c *Cache) evictLocked() []victim {
	var vs []victim
	for c.bytes > c.limit {
		e := c.lru.back()
		if e == nil {
			break
		}
		c.removeLocked(e)
		c.evictions.Add(1)
		vs = append(vs, victim{e.file, e.index})
	}
	return vs
}

// finishEvictions retires evicted blocks on disk, and removes the directory of a file
// whose last block went. Caller holds no lock.
func (c *Cache) finishEvictions(vs []victim) {
	for _, v := range vs {
		fe := v.fe
		fe.mu.Lock()
		c.mu.Lock()
		gone := fe.gone
		reinstalled := fe.blocks[v.index] != nil // a Put brought it back: keep it
		empty := len(fe.blocks) == 0
		c.mu.Unlock()
		var trash string
		switch {
		case gone: // its directory went with it
		case empty:
			trash, _ = c.dropDir(fe, false)
		case !reinstalled:
			c.eraseBlock(fe, v.index)
		}
		fe.mu.Unlock()
		c.removeTrash(trash)
	}
}

// dropDir takes fe and all its blocks out of the index and moves its directory into the
// temp directory, returning the new name for removeTrash (deleting a large sparse file
// happens outside the locks, and a crash halfway leaves it where Open deletes it).
// Caller holds fe.mu.
func (c *Cache) dropDir(fe *fileEntry, forgotten bool) (trash string, err error) {
	c.fds.forget(fe) // reads in flight keep their descriptors; nothing opens fe.dir again
	if fe.onDisk {
		t := c.tempName(".gone")
		if err = os.Rename(fe.dir, t); err == nil {
			trash = t
		} else if errors.Is(err, fs.ErrNotExist) {
			err = nil
		} else {
			err = os.RemoveAll(fe.dir)
		}
		fe.onDisk = false
	}
	c.mu.Lock()
	for _, e := range fe.blocks {
		c.removeLocked(e)
	}
	if c.files[fe.key] == fe {
		delete(c.files, fe.key)
	}
	fe.gone, fe.forgotten = true, forgotten
	c.mu.Unlock()
	return trash, err
}

// removeTrash deletes a directory dropDir moved aside. Caller holds no lock.
func (c *Cache) removeTrash(trash string) {
	if trash == "" {
		return
	}
	if err := os.RemoveAll(trash); err != nil {
		c.log.Warn("cache: cannot remove a directory; Open will retry", "err", err)
	}
}

// shrinkAfterFull lowers the effective limit after ENOSPC/EDQUOT and evicts down to it,
// so that the retry has room. See the package doc.
func (c *Cache) shrinkAfterFull() {
	c.mu.Lock()
	c.lastFull = c.now()
	bs := c.opts.BlockSize
	lim := c.bytes - max(c.bytes/fullShrinkFraction, fullShrinkBlocks*bs)
	lim = max(lim, minLimitBlocks*bs)
	if lim < c.limit {
		c.limit = lim
		c.log.Warn("cache: disk full; holding fewer bytes for a while", "limit", lim, "for", fullRecovery)
	}
	vs := c.evictLocked()
	c.mu.Unlock()
	c.finishEvictions(vs)
}
