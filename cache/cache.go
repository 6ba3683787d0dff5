package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
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
	// touchInterval bounds how often Get rewrites a block's index record to refresh its
	// last-use stamp: often enough that a restart's LRU order (by stamp) follows use,
	// rare enough to cost nothing.
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
	tree     string   // Dir/v2
	tmpDir   string   // Dir/v2/tmp
	lockFile *os.File // holds the flock on Dir/v2/lock
	log      *slog.Logger
	scan     scanReport
	// Test hooks, set before the Cache is shared: the clock, and every write that may
	// need new disk space (block data, index records, temp files; a fault injector
	// returns ENOSPC from it).
	now     func() time.Time
	writeAt func(f *os.File, p []byte, off int64) (int, error)
	// readDirect is the direct read of block data (preadNoWait; a test makes it busy).
	readDirect func(fd int, p []byte, off int64) error

	closed   atomic.Bool
	noPunch  atomic.Bool   // the file system cannot punch holes (logged once)
	noDirect atomic.Bool   // the file system refused a direct transfer (logged once; directio.go)
	tmpSeq   atomic.Uint64 // names temp files; the flock makes this process the only writer

	fds fdCache // open data and index files; its own lock, taken last

	// Counters: atomic, so Get needs mu only for the index.
	hits, misses, corrupt, puts, evictions, writeErrors, diskFull atomic.Int64
	// directBusy: direct reads that would have waited for the file's lock and went
	// through the page cache instead; directWrites: blocks stored with direct I/O.
	directBusy, directWrites atomic.Int64

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
	id  [keyIDLen]byte // first bytes of the key's SHA-256, as in index records

	// mu serialises changes to dir on disk: writing a block and its record, retiring
	// one, refreshing a record's stamp, writing key and meta, removing dir. Held across
	// that I/O; never two at once.
	mu sync.Mutex
	// Guarded by mu.
	onDisk bool // dir and its key file exist

	// Guarded by Cache.fds.mu.
	handles        *fileHandles // open data and index files, if cached
	handlesDropped bool         // dir is being dropped: open nothing more

	// Guarded by Cache.mu. gone and forgotten change only with mu held too, so either lock
	// is enough to read them.
	gone      bool // no longer in Cache.files: a Put that finds it looks up a fresh entry
	forgotten bool // gone because of Forget: Puts that raced with it are dropped
	blocks    map[int64]*blockEntry
	meta      Validator
	hasMeta   bool
}

// Stats are counters since Open plus the current size.
type Stats struct {
	Hits         int64 // Gets that returned a block
	Misses       int64 // Gets that did not, including corrupt ones
	Corrupt      int64 // blocks a Get found bad, short or missing (removed; see the package doc)
	Puts         int64 // blocks stored
	Evictions    int64 // blocks evicted for space
	WriteErrors  int64 // Puts and SetValidators that failed
	DiskFull     int64 // writes that hit ENOSPC or EDQUOT (a retried Put may still succeed)
	DirectBusy   int64 // hits read through the page cache because a direct read would have waited (directio.go)
	DirectWrites int64 // blocks stored with direct I/O (PutSumDirect, where it could)

	Bytes  int64 // data bytes of the blocks held
	Blocks int64 // blocks held
	Files  int64 // FileKeys with an entry
	Limit  int64 // effective limit: MaxBytes, or lower for a while after ENOSPC

	ScanTime    time.Duration // how long Open took to rebuild the index
	ScanRemoved int64         // leftover temp files, damaged records, orphaned block data and stray files Open removed
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
		opts:       opts,
		log:        opts.Logger,
		tree:       filepath.Join(opts.Dir, treeName),
		now:        time.Now,
		writeAt:    (*os.File).WriteAt,
		readDirect: preadNoWait,
		files:      make(map[FileKey]*fileEntry),
		limit:      opts.MaxBytes,
	}
	c.tmpDir = filepath.Join(c.tree, tmpName)
	c.lru.init()
	c.fds.init(maxOpenFiles, !opts.BufferedIO)
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
	c.removeOldTree()
	if err := c.load(); err != nil {
		lock.Close()
		return nil, fmt.Errorf("cache: open %s: %w", opts.Dir, err)
	}
	c.scan.took = time.Since(start)
	c.log.Debug("cache: opened", "dir", opts.Dir, "blocks", c.blocks, "bytes", c.bytes,
		"files", len(c.files), "removed", c.scan.removed, "took", c.scan.took)
	return c, nil
}

// Close releases the directory. Later calls miss (Get) or fail with ErrClosed.
func (c *Cache) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.fds.closeAll() // files in use by a Get or Put close when it ends
	return c.lockFile.Close()
}

// Has reports from the in-memory index (no I/O) whether the block is believed present.
func (c *Cache) Has(key FileKey, block int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	fe := c.files[key]
	return fe != nil && fe.blocks[block] != nil
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

// SetValidator records v for key beside its blocks (in the meta file), so that after a
// restart the caller can tell whether the blocks belong to the origin's current object.
// Like Put, a SetValidator racing with Forget of the same key is dropped and returns nil.
func (c *Cache) SetValidator(key FileKey, v Validator) error {
	if c.closed.Load() {
		return fmt.Errorf("cache: set validator of %v: %w", key, ErrClosed)
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
			err = c.writeAtomic(filepath.Join(fe.dir, metaName), encodeMeta(v))
		}
		if err != nil {
			trash := c.abandonIfEmpty(fe)
			fe.mu.Unlock()
			c.removeTrash(trash)
			c.writeErrors.Add(1)
			if isNoSpace(err) {
				c.diskFull.Add(1)
				return fmt.Errorf("cache: set validator of %v: %w: %w", key, ErrCacheFull, err)
			}
			return fmt.Errorf("cache: set validator of %v: %w", key, err)
		}
		c.mu.Lock()
		fe.meta, fe.hasMeta = v, true
		c.mu.Unlock()
		fe.mu.Unlock()
		return nil
	}
}

// Validator returns what SetValidator recorded for key, in this run or before a restart.
func (c *Cache) Validator(key FileKey) (v Validator, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fe := c.files[key]; fe != nil && fe.hasMeta {
		return fe.meta, true
	}
	return Validator{}, false
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
	s.DirectBusy = c.directBusy.Load()
	s.DirectWrites = c.directWrites.Load()
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
		os.Remove(fe.dir) // if still empty: Open would remove it anyway
		return err
	}
	fe.onDisk = true
	return nil
}

// abandonIfEmpty drops an entry that holds nothing after a failed Put or SetValidator, with
// its directory, so a failure leaves nothing behind. It returns what removeTrash must
// delete once fe.mu is released. Caller holds fe.mu.
func (c *Cache) abandonIfEmpty(fe *fileEntry) (trash string) {
	c.mu.Lock()
	empty := len(fe.blocks) == 0 && !fe.hasMeta
	c.mu.Unlock()
	if !empty {
		return ""
	}
	trash, err := c.dropDir(fe, false)
	if err != nil {
		c.log.Warn("cache: cannot remove a directory; Open will retry", "err", err)
	}
	return trash
}

// writeTemp writes data to a new temp file and returns its name. On error no file is
// left behind.
func (c *Cache) writeTemp(data []byte) (string, error) {
	name := c.tempName("")
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return "", err
	}
	_, err = c.writeAt(f, data, 0)
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

// removeOldTree deletes the tree of the previous format (one file per block), unless an
// older playhead still has it open. It is only a cache: nothing in it is migrated.
func (c *Cache) removeOldTree() {
	old := filepath.Join(c.opts.Dir, oldTreeName)
	lock, err := os.OpenFile(filepath.Join(old, lockName), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Lstat(old); err != nil {
			return // nothing there
		}
	} else if err == nil {
		defer lock.Close()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			c.log.Info("cache: an older playhead uses the old-format tree; leaving it", "dir", old)
			return
		}
	}
	start := time.Now()
	if err := os.RemoveAll(old); err != nil {
		c.log.Warn("cache: cannot remove the old-format tree", "err", err)
		return
	}
	c.log.Info("cache: removed the old-format tree", "dir", old, "took", time.Since(start))
}

// tempName is a fresh name in the temp directory.
func (c *Cache) tempName(suffix string) string {
	return filepath.Join(c.tmpDir, strconv.FormatUint(c.tmpSeq.Add(1), 10)+suffix)
}

func isNoSpace(err error) bool {
	return err != nil && (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT))
}
