package cache

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Rebuilding the index at Open. The scan reads each key directory's index file (skipping
// its holes) but no block data: a damaged block is found by the first Get that reads it.
// It costs a few opens and reads per remote file, not a stat per block, spread over
// scanWorkers.

const (
	// scanWorkers scan fan-out directories in parallel: the scan is bound by
	// file-system latency, not CPU.
	scanWorkers = 8
)

// scanReport is what Open learned, kept for Stats.
type scanReport struct {
	took    time.Duration
	removed int64 // leftover temp files and damaged entries removed
}

// scanChunk is how much of an index file the scan reads at once: 1024 records.
const scanChunk = 1024 * recLen

// scannedBlock is a block record found by the scan, before it is put in LRU order.
type scannedBlock struct {
	fe    *fileEntry
	index int64
	size  int32
	stamp int64 // unix seconds of last use
}

// load prepares the tree (format check, temp cleanup, fan-out dirs) and indexes it.
func (c *Cache) load() error {
	if err := c.checkFormat(); err != nil {
		return err
	}
	// Fan-out directories are made on first use (ensureDir) and never removed.
	ents, err := os.ReadDir(c.tree)
	if err != nil {
		return err
	}
	var fans []string
	for _, e := range ents {
		if n := e.Name(); len(n) == 2 && e.IsDir() && isLowerHex(n) {
			fans = append(fans, n)
		}
	}

	var (
		removed atomic.Int64
		wg      sync.WaitGroup
		mu      sync.Mutex
		files   []*fileEntry
		found   []scannedBlock
		jobs    = make(chan string)
	)
	for range scanWorkers {
		wg.Go(func() {
			var myFiles []*fileEntry
			var myBlocks []scannedBlock
			for fan := range jobs {
				myFiles, myBlocks = c.scanFan(fan, myFiles, myBlocks, &removed)
			}
			mu.Lock()
			files = append(files, myFiles...)
			found = append(found, myBlocks...)
			mu.Unlock()
		})
	}
	for _, fan := range fans {
		jobs <- fan
	}
	close(jobs)
	wg.Wait()
	c.scan.removed += removed.Load()

	// Oldest first, so each push to the front leaves the newest at the front. Stamps are
	// whole seconds; within one, a lower block was most likely read first.
	slices.SortFunc(found, func(a, b scannedBlock) int {
		if c := cmp.Compare(a.stamp, b.stamp); c != 0 {
			return c
		}
		return cmp.Compare(a.index, b.index)
	})
	c.mu.Lock()
	for _, fe := range files {
		c.files[fe.key] = fe
	}
	for _, b := range found {
		c.addLocked(&blockEntry{file: b.fe, index: b.index, size: b.size, stamp: b.stamp})
	}
	vs := c.evictLocked() // MaxBytes may have been lowered since the last run
	c.mu.Unlock()
	c.finishEvictions(vs)
	return nil
}

// checkFormat wipes the tree if it was written by another format or block size, and
// empties the temp directory.
func (c *Cache) checkFormat() error {
	want := formatText(c.opts.BlockSize)
	got, err := os.ReadFile(filepath.Join(c.tree, formatName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if !bytes.Equal(got, want) {
		ents, err := os.ReadDir(c.tree)
		if err != nil {
			return err
		}
		wiped := 0
		for _, e := range ents {
			if e.Name() != lockName {
				if err := os.RemoveAll(filepath.Join(c.tree, e.Name())); err != nil {
					return err
				}
				wiped++
			}
		}
		if wiped > 0 {
			c.log.Info("cache: wiped a tree written with another format or block size", "dir", c.tree)
		}
	}
	// Leftovers of a crash: temp files of unfinished writes, directories being deleted.
	if ents, err := os.ReadDir(c.tmpDir); err == nil {
		c.scan.removed += int64(len(ents))
	}
	if err := os.RemoveAll(c.tmpDir); err != nil {
		return err
	}
	if err := os.Mkdir(c.tmpDir, dirPerm); err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return c.writeAtomic(filepath.Join(c.tree, formatName), want)
	}
	return nil
}

// scanFan indexes the key directories in one fan-out directory, removing what does not
// belong there.
func (c *Cache) scanFan(fan string, files []*fileEntry, blocks []scannedBlock, removed *atomic.Int64) ([]*fileEntry, []scannedBlock) {
	dir := filepath.Join(c.tree, fan)
	ents, err := os.ReadDir(dir)
	if err != nil {
		c.log.Warn("cache: scan", "err", err)
		return files, blocks
	}
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(dir, name)
		var sum [32]byte
		if len(name) != hex.EncodedLen(len(sum)) || !e.IsDir() || name[:2] != fan {
			c.removeStray(path, "not a key directory", removed)
			continue
		}
		if _, err := hex.Decode(sum[:], []byte(name)); err != nil {
			c.removeStray(path, "not a key directory", removed)
			continue
		}
		fe, bs, err := c.scanKeyDir(path, name, sum, removed)
		if err != nil {
			c.removeStray(path, err.Error(), removed)
			continue
		}
		if len(bs) == 0 {
			// Nothing to serve; a lone validator is not worth a directory.
			os.RemoveAll(path)
			continue
		}
		files = append(files, fe)
		blocks = append(blocks, bs...)
	}
	return files, blocks
}

// scanKeyDir reads one key directory. An error means the whole directory is unusable.
func (c *Cache) scanKeyDir(dir, name string, sum [32]byte, removed *atomic.Int64) (*fileEntry, []scannedBlock, error) {
	kb, err := os.ReadFile(filepath.Join(dir, keyName))
	if err != nil {
		return nil, nil, fmt.Errorf("key file: %w", err)
	}
	key, err := decodeKey(kb, name)
	if err != nil {
		return nil, nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	fe := &fileEntry{key: key, dir: dir, onDisk: true, blocks: map[int64]*blockEntry{}}
	copy(fe.id[:], sum[:])
	var hasData, hasIndex bool
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		switch e.Name() {
		case keyName:
			continue
		case metaName:
			if mb, err := os.ReadFile(path); err == nil {
				if v, err := decodeMeta(mb); err == nil {
					fe.meta, fe.hasMeta = v, true
					continue
				}
			}
			c.removeStray(path, "bad meta file", removed)
			continue
		case dataName, indexName:
			if !e.Type().IsRegular() {
				return nil, nil, fmt.Errorf("%s is not a regular file", e.Name())
			}
			hasData = hasData || e.Name() == dataName
			hasIndex = hasIndex || e.Name() == indexName
			continue
		}
		c.removeStray(path, "unknown file", removed)
	}
	switch {
	case !hasIndex:
		if hasData {
			// Data nobody vouches for (the index file was lost): count it, as the
			// records that were lost with it would have been.
			removed.Add(1)
			c.log.Debug("cache: scan: data file without index file", "key", fe.key)
		}
		return fe, nil, nil // the caller removes the directory
	case !hasData:
		return nil, nil, errors.New("index file without data file")
	}
	h, err := openHandles(dir, false, false) // the scan reads records only
	if err != nil {
		return nil, nil, err
	}
	defer h.close()
	bs, err := c.scanIndex(fe, h, removed)
	if err != nil {
		return nil, nil, err
	}
	if len(bs) > 0 {
		removed.Add(c.punchOrphans(h, bs))
	}
	return fe, bs, nil
}

// scanIndex returns the blocks whose records are sound, retiring the records that are
// not. Holes (never-written or retired stretches of records) are skipped unread.
func (c *Cache) scanIndex(fe *fileEntry, h *fileHandles, removed *atomic.Int64) ([]scannedBlock, error) {
	ist, err := h.index.Stat()
	if err != nil {
		return nil, err
	}
	dst, err := h.data.Stat()
	if err != nil {
		return nil, err
	}
	bsize := c.opts.BlockSize
	buf := make([]byte, scanChunk)
	var bs []scannedBlock
	for off := int64(0); off < ist.Size(); {
		d, ok, err := nextData(h.indexFd, off)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		off = d - d%recLen
		n, err := h.index.ReadAt(buf, off)
		if n == 0 {
			if err == nil || errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		for p := 0; p < n; p += recLen {
			rb := buf[p:min(p+recLen, n)]
			if isZero(rb) {
				continue
			}
			block := (off + int64(p)) / recLen
			if len(rb) < recLen {
				// Torn at the end of the file: drop the fragment.
				removed.Add(1)
				c.log.Debug("cache: scan: index ends inside a record", "key", fe.key, "block", block)
				if err := h.index.Truncate(block * recLen); err != nil {
					c.log.Warn("cache: scan", "err", err)
				}
				continue
			}
			r, err := decodeRecord(rb)
			if err == nil {
				err = r.check(fe.id, block, bsize)
			}
			if err == nil && block*bsize+int64(r.dataLen) > dst.Size() {
				err = fmt.Errorf("%w: data file ends before block %d", errCorrupt, block)
			}
			if err != nil {
				removed.Add(1)
				c.log.Debug("cache: scan: bad record", "key", fe.key, "block", block, "err", err)
				c.clearSlot(h, block, true)
				continue
			}
			bs = append(bs, scannedBlock{fe: fe, index: block, size: int32(r.dataLen), stamp: int64(r.stamp)})
		}
		off += int64(n)
	}
	return bs, nil
}

// punchOrphans returns to holes the data of blocks with no record: a crash between a
// block's data write and its record, or between retiring a record and punching its
// data, leaves such bytes, which the index would never count. bs is in block order.
// It returns how many blocks' ranges it punched (Stats.ScanRemoved counts them).
func (c *Cache) punchOrphans(h *fileHandles, bs []scannedBlock) (punched int64) {
	bsize := c.opts.BlockSize
	st, err := h.data.Stat()
	if err != nil {
		return 0
	}
	i := 0 // bs[i] is the first sound block at or after the current one
	for off := int64(0); off < st.Size(); {
		d, ok, err := nextData(h.dataFd, off)
		if err != nil || !ok {
			return punched
		}
		end, err := nextHole(h.dataFd, d)
		if err != nil {
			return punched
		}
		for b := d / bsize; b*bsize < end; b++ {
			for i < len(bs) && bs[i].index < b {
				i++
			}
			if i < len(bs) && bs[i].index == b {
				continue
			}
			if err := punchHole(h.dataFd, b*bsize, bsize); err != nil {
				c.log.Warn("cache: scan", "err", err)
				return punched
			}
			punched++
		}
		off = max(end, off+1)
	}
	return punched
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

func (c *Cache) removeStray(path, why string, removed *atomic.Int64) {
	removed.Add(1)
	c.log.Debug("cache: scan: removing", "path", path, "why", why)
	if err := os.RemoveAll(path); err != nil {
		c.log.Warn("cache: scan: cannot remove", "err", err)
	}
}

func isLowerHex(s string) bool {
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}
