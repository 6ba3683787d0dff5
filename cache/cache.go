package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Errors the cache returns. Use errors.Is; they are wrapped with the key and block.
var (
	// ErrCacheFull: the disk (or quota) is full. The block was not stored; the caller
	// should serve it from memory. The underlying ENOSPC/EDQUOT is wrapped too.
	ErrCacheFull = errors.New("cache disk full")
	// ErrClosed: the Cache was closed.
	ErrClosed = errors.New("cache closed")
	// ErrInUse: another Cache (in this or another process) has the directory open.
	ErrInUse = errors.New("cache directory in use")
)

const (
	// touchInterval bounds how often Get rewrites a block's mtime: often enough that a
	// restart's LRU order (by mtime) follows use, rare enough to cost nothing.
	touchInterval = 10 * time.Minute
	// fullRecovery is how long the limit stays lowered after ENOSPC before it is raised
	// back to MaxBytes (space may have been freed by others meanwhile).
	fullRecovery = 5 * time.Minute
	// After ENOSPC the effective limit drops below the bytes held by the larger of
	// 1/fullShrinkFraction of them and fullShrinkBlocks blocks: enough room for the retry
	// and the next few Puts, and some distance from the edge of a disk that other
	// programs keep filling, so we don't fail and evict on every Put.
	fullShrinkFraction = 16
	fullShrinkBlocks   = 16
)

// Cache is an on-disk block cache. All methods are safe for concurrent use.
type Cache struct {
	// Set by Open, then read-only.
	opts     Options
	tree     string   // Dir/v1
	tmpDir   string   // Dir/v1/tmp
	lockFile *os.File // holds the flock on Dir/v1/lock
	scan     scanReport
	// Test hooks, set before the Cache is shared: the clock and the write of temp files
	// (a fault injector returns ENOSPC from it).
	now   func() time.Time
	write func(f *os.File, p []byte) (int, error)

	closed atomic.Bool
	tmpSeq atomic.Uint64 // names temp files; the flock makes this process the only writer

	// Counters: atomic, so Get needs mu only for the index.
	hits, misses, corrupt, puts, evictions, writeErrors, diskFull atomic.Int64

	// mu guards the index and LRU. Never held across file I/O. Lock order: a
	// fileEntry.mu, then mu.
	mu       sync.Mutex
	files    map[FileKey]*fileEntry
	lru      lruList
	bytes    int64     // data bytes of indexed blocks
	blocks   int64     // indexed blocks
	limit    int64     // effective limit: MaxBytes, or lower for a while after ENOSPC
	lastFull time.Time // last ENOSPC/EDQUOT
}

// fileEntry is the index of one FileKey's directory.
type fileEntry struct {
	// Set at creation, then read-only.
	key FileKey
	dir string
	id  [keyIDLen]byte // first bytes of the key's SHA-256, as in block headers

	// mu serialises changes to dir on disk: renaming a block in, unlinking one, writing
	// key and meta, removing dir. Held across that I/O; never two at once.
	mu sync.Mutex
	// Guarded by mu.
	onDisk bool // dir and its key file exist

	// Guarded by Cache.mu. gone and forgotten change only with mu held too, so either lock
	// is enough to read them.
	gone      bool // no longer in Cache.files: a Put that finds it looks up a fresh entry
	forgotten bool // gone because of Forget: Puts that raced with it are dropped
	blocks    map[int64]*blockEntry
	meta      string
	hasMeta   bool
}

// Stats are counters since Open plus the current size.
type Stats struct {
	Hits        int64 // Gets that returned a block
	Misses      int64 // Gets that did not, including corrupt ones
	Corrupt     int64 // Gets that found a bad, short or missing block file (it is removed)
	Puts        int64 // blocks stored
	Evictions   int64 // blocks evicted for space
	WriteErrors int64 // Puts and SetMetas that failed
	DiskFull    int64 // writes that hit ENOSPC or EDQUOT (a retried Put may still succeed)

	Bytes  int64 // data bytes of the blocks held
	Blocks int64 // blocks held
	Files  int64 // FileKeys with an entry
	Limit  int64 // effective limit: MaxBytes, or lower for a while after ENOSPC

	ScanTime    time.Duration // how long Open took to rebuild the index
	ScanRemoved int64         // leftover temp files and damaged entries Open removed
}

// Open opens (creating if needed) the cache in opts.Dir and rebuilds its index from the
// files found there. Only one Cache may have a directory open at a time.
func Open(opts Options) (*Cache, error) {
	opts = opts.withDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	c := &Cache{
		opts:  opts,
		tree:  filepath.Join(opts.Dir, treeName),
		now:   time.Now,
		write: (*os.File).Write,
		files: make(map[FileKey]*fileEntry),
		limit: opts.MaxBytes,
	}
	c.tmpDir = filepath.Join(c.tree, tmpName)
	c.lru.init()
	if err := os.MkdirAll(c.tree, dirPerm); err != nil {
		return nil, fmt.Errorf("cache: open %s: %w", opts.Dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(c.tree, lockName), os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, fmt.Errorf("cache: open %s: %w", opts.Dir, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			err = ErrInUse
		}
		return nil, fmt.Errorf("cache: open %s: %w", opts.Dir, err)
	}
	c.lockFile = lock
	if err := c.load(); err != nil {
		lock.Close()
		return nil, fmt.Errorf("cache: open %s: %w", opts.Dir, err)
	}
	c.scan.took = time.Since(start)
	c.logf("cache: opened %s: %d blocks, %d bytes in %d files; removed %d leftovers; took %v",
		opts.Dir, c.blocks, c.bytes, len(c.files), c.scan.removed, c.scan.took)
	return c, nil
}

// Close releases the directory. Later calls miss (Get) or fail with ErrClosed.
func (c *Cache) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	return c.lockFile.Close()
}

// Has reports from the in-memory index (no I/O) whether the block is believed present.
func (c *Cache) Has(key FileKey, block int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	fe := c.files[key]
	return fe != nil && fe.blocks[block] != nil
}

// Get copies block `block` of key into dst and returns its length. dst must hold
// BlockSize bytes (a last, short block needs only its length, but at least 40). ok is
// false on a miss, and on a bad block file, which is then removed and counted Corrupt.
// Get does not allocate for the data and holds no lock during I/O.
func (c *Cache) Get(key FileKey, block int64, dst []byte) (n int, ok bool) {
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
	gen := e.gen
	touch := now-e.stamp >= int64(touchInterval/time.Second)
	if touch {
		e.stamp = now
	}
	c.mu.Unlock()

	n, err := c.readBlock(fe, block, dst)
	if err != nil {
		c.misses.Add(1)
		if errors.Is(err, errCorrupt) {
			c.dropCorrupt(fe, e, gen, err)
		}
		return 0, false
	}
	if touch {
		t := time.Unix(now, 0)
		_ = os.Chtimes(blockPath(fe.dir, block), t, t) // only LRU order at restart is at stake
	}
	c.hits.Add(1)
	return n, true
}

// errDstShort: the caller's buffer cannot hold the block (a miss, not a corruption).
var errDstShort = errors.New("destination buffer too short")

// readBlock reads and verifies block of fe into dst. Errors wrapping errCorrupt mean the
// file is bad or missing.
func (c *Cache) readBlock(fe *fileEntry, block int64, dst []byte) (int, error) {
	if len(dst) < hdrLen {
		return 0, errDstShort
	}
	fd, err := openRead(blockPath(fe.dir, block))
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return 0, fmt.Errorf("%w: %v block %d: missing", errCorrupt, fe.key, block)
		}
		return 0, fmt.Errorf("open %v block %d: %w", fe.key, block, err) // e.g. EMFILE: not the file's fault
	}
	defer syscall.Close(fd)
	// The header is read into dst, then overwritten by the data: no scratch buffer.
	if err := preadFull(fd, dst[:hdrLen], 0); err != nil {
		return 0, fmt.Errorf("%w: %v block %d: header: %w", errCorrupt, fe.key, block, err)
	}
	h, err := decodeHeader(dst)
	if err != nil {
		return 0, fmt.Errorf("%v block %d: %w", fe.key, block, err)
	}
	switch {
	case h.keyID != fe.id:
		return 0, fmt.Errorf("%w: %v block %d: file belongs to another key", errCorrupt, fe.key, block)
	case h.block != uint64(block):
		return 0, fmt.Errorf("%w: %v block %d: file holds block %d", errCorrupt, fe.key, block, h.block)
	case int64(h.blockSize) != c.opts.BlockSize || h.dataLen == 0 || int64(h.dataLen) > c.opts.BlockSize:
		return 0, fmt.Errorf("%w: %v block %d: %d bytes of a %d-byte block", errCorrupt, fe.key, block, h.dataLen, h.blockSize)
	case int(h.dataLen) > len(dst):
		return 0, errDstShort
	}
	data := dst[:h.dataLen]
	if err := preadFull(fd, data, hdrLen); err != nil {
		return 0, fmt.Errorf("%w: %v block %d at offset %d: %w", errCorrupt, fe.key, block, block*c.opts.BlockSize, err)
	}
	if crc32Sum(data) != h.dataCRC {
		return 0, fmt.Errorf("%w: %v block %d at offset %d: data checksum mismatch", errCorrupt, fe.key, block, block*c.opts.BlockSize)
	}
	return len(data), nil
}

// dropCorrupt removes the block file a Get found bad, unless the entry was evicted or
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
	if err := os.Remove(blockPath(fe.dir, e.index)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.logf("cache: cannot remove corrupt block: %v", err)
	}
	c.logf("cache: dropped block: %v", reason)
}

// Put stores data (1 to BlockSize bytes) as block `block` of key, replacing any copy.
// On failure nothing is left behind, the error wraps ErrCacheFull (disk or quota full)
// or the I/O error, and the caller should serve the data from memory. A Put that races
// with Forget of the same key is dropped and returns nil.
func (c *Cache) Put(key FileKey, block int64, data []byte) error {
	if c.closed.Load() {
		return fmt.Errorf("cache: put %v block %d: %w", key, block, ErrClosed)
	}
	if block < 0 || len(data) == 0 || int64(len(data)) > c.opts.BlockSize {
		return fmt.Errorf("cache: put %v block %d: %d bytes is not a block of at most %d", key, block, len(data), c.opts.BlockSize)
	}
	sum := key.sum()
	h := blockHeader{block: uint64(block), blockSize: uint32(c.opts.BlockSize), dataLen: uint32(len(data)), dataCRC: crc32Sum(data)}
	copy(h.keyID[:], sum[:])
	var hdr [hdrLen]byte
	h.encode(hdr[:])

	tmp, err := c.writeTemp(hdr[:], data)
	if isNoSpace(err) {
		c.diskFull.Add(1)
		c.shrinkAfterFull()
		tmp, err = c.writeTemp(hdr[:], data)
		if isNoSpace(err) {
			c.diskFull.Add(1)
		}
	}
	if err == nil {
		err = c.install(key, sum, block, len(data), tmp)
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

// install renames the temp file tmp into key's directory as block and indexes it.
func (c *Cache) install(key FileKey, sum [32]byte, block int64, size int, tmp string) error {
	for {
		fe := c.fileFor(key, sum)
		fe.mu.Lock()
		if fe.gone {
			fe.mu.Unlock()
			if fe.forgotten {
				os.Remove(tmp)
				return nil
			}
			continue // retired by eviction after we looked it up: take the fresh entry
		}
		err := c.ensureDir(fe)
		if err == nil {
			err = os.Rename(tmp, blockPath(fe.dir, block))
		}
		if err != nil {
			c.abandonIfEmpty(fe)
			fe.mu.Unlock()
			os.Remove(tmp)
			return err
		}
		now := c.now()
		c.mu.Lock()
		if c.limit < c.opts.MaxBytes && now.Sub(c.lastFull) >= fullRecovery {
			c.limit = c.opts.MaxBytes
		}
		if e := fe.blocks[block]; e != nil {
			c.bytes += int64(size) - int64(e.size)
			e.size = int32(size)
			e.gen++
			e.stamp = now.Unix()
			c.lru.moveToFront(e)
		} else {
			e = &blockEntry{file: fe, index: block, size: int32(size), stamp: now.Unix()}
			c.addLocked(e)
		}
		victims := c.evictLocked()
		c.mu.Unlock()
		fe.mu.Unlock()
		c.puts.Add(1)
		c.finishEvictions(victims)
		return nil
	}
}

// Forget removes every block of key and its meta (the remote object changed).
func (c *Cache) Forget(key FileKey) error {
	for {
		c.mu.Lock()
		fe := c.files[key]
		c.mu.Unlock()
		if fe == nil {
			return nil
		}
		fe.mu.Lock()
		if fe.gone {
			fe.mu.Unlock()
			continue
		}
		trash, err := c.dropDir(fe, true)
		fe.mu.Unlock()
		c.removeTrash(trash)
		if err != nil {
			return fmt.Errorf("cache: forget %v: %w", key, err)
		}
		return nil
	}
}

// SetMeta records the origin's ETag for key beside its blocks, so that after a restart
// the caller can tell whether the blocks belong to the origin's current object. Like
// Put, a SetMeta racing with Forget of the same key is dropped and returns nil.
func (c *Cache) SetMeta(key FileKey, etag string) error {
	if c.closed.Load() {
		return fmt.Errorf("cache: set meta of %v: %w", key, ErrClosed)
	}
	sum := key.sum()
	for {
		fe := c.fileFor(key, sum)
		fe.mu.Lock()
		if fe.gone {
			fe.mu.Unlock()
			if fe.forgotten {
				return nil
			}
			continue
		}
		err := c.ensureDir(fe)
		if err == nil {
			err = c.writeAtomic(filepath.Join(fe.dir, metaName), encodeMeta(etag))
		}
		if err != nil {
			c.abandonIfEmpty(fe)
			fe.mu.Unlock()
			c.writeErrors.Add(1)
			if isNoSpace(err) {
				c.diskFull.Add(1)
				return fmt.Errorf("cache: set meta of %v: %w: %w", key, ErrCacheFull, err)
			}
			return fmt.Errorf("cache: set meta of %v: %w", key, err)
		}
		c.mu.Lock()
		fe.meta, fe.hasMeta = etag, true
		c.mu.Unlock()
		fe.mu.Unlock()
		return nil
	}
}

// Meta returns the ETag recorded by SetMeta, if any.
func (c *Cache) Meta(key FileKey) (etag string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fe := c.files[key]; fe != nil && fe.hasMeta {
		return fe.meta, true
	}
	return "", false
}

// Stats returns a snapshot of the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	s := Stats{Bytes: c.bytes, Blocks: c.blocks, Files: int64(len(c.files)), Limit: c.limit}
	c.mu.Unlock()
	s.Hits = c.hits.Load()
	s.Misses = c.misses.Load()
	s.Corrupt = c.corrupt.Load()
	s.Puts = c.puts.Load()
	s.Evictions = c.evictions.Load()
	s.WriteErrors = c.writeErrors.Load()
	s.DiskFull = c.diskFull.Load()
	s.ScanTime = c.scan.took
	s.ScanRemoved = c.scan.removed
	return s
}

// fileFor returns key's entry, creating an empty one (nothing on disk yet) if needed.
func (c *Cache) fileFor(key FileKey, sum [32]byte) *fileEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fe := c.files[key]; fe != nil {
		return fe
	}
	fe := &fileEntry{key: key, dir: keyDir(c.tree, sum), blocks: make(map[int64]*blockEntry)}
	copy(fe.id[:], sum[:])
	c.files[key] = fe
	return fe
}

// ensureDir creates fe's directory and key file. Caller holds fe.mu.
func (c *Cache) ensureDir(fe *fileEntry) error {
	if fe.onDisk {
		return nil
	}
	if err := os.MkdirAll(fe.dir, dirPerm); err != nil {
		return err
	}
	// The key file goes in before any block: Open removes a directory without one.
	if err := c.writeAtomic(filepath.Join(fe.dir, keyName), encodeKey(fe.key)); err != nil {
		return err
	}
	fe.onDisk = true
	return nil
}

// abandonIfEmpty drops an entry that a failed Put or SetMeta created and left empty.
// Caller holds fe.mu.
func (c *Cache) abandonIfEmpty(fe *fileEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(fe.blocks) == 0 && !fe.hasMeta && !fe.onDisk {
		if c.files[fe.key] == fe {
			delete(c.files, fe.key)
		}
		fe.gone = true
	}
}

// writeTemp writes parts to a new temp file and returns its name. On error no file is
// left behind.
func (c *Cache) writeTemp(parts ...[]byte) (string, error) {
	name := c.tempName("")
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return "", err
	}
	for _, p := range parts {
		if err == nil {
			_, err = c.write(f, p)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr // NFS and quotas may report ENOSPC only at close
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

// writeAtomic replaces the file at path with data (temp file, then rename).
func (c *Cache) writeAtomic(path string, data []byte) error {
	tmp, err := c.writeTemp(data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// tempName is a fresh name in the temp directory.
func (c *Cache) tempName(suffix string) string {
	return filepath.Join(c.tmpDir, strconv.FormatUint(c.tmpSeq.Add(1), 10)+suffix)
}

func (c *Cache) logf(format string, args ...any) {
	if c.opts.Logf != nil {
		c.opts.Logf(format, args...)
	}
}

func isNoSpace(err error) bool {
	return err != nil && (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT))
}
