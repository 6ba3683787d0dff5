package cache

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Rebuilding the index at Open. The scan reads directories and stats block files but
// reads no block data: a damaged block is found by the first Get that reads it. It costs
// one lstat per block (about 0.1 s for 80k blocks on a warm SSD), spread over scanWorkers.

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

// scannedBlock is a block file found by the scan, before it is put in LRU order.
type scannedBlock struct {
	fe    *fileEntry
	index int64
	size  int32
	mtime int64 // unix nanoseconds
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

	// Oldest first, so each push to the front leaves the newest at the front.
	slices.SortFunc(found, func(a, b scannedBlock) int {
		switch {
		case a.mtime < b.mtime:
			return -1
		case a.mtime > b.mtime:
			return 1
		}
		return 0
	})
	c.mu.Lock()
	for _, fe := range files {
		c.files[fe.key] = fe
	}
	for _, b := range found {
		c.addLocked(&blockEntry{file: b.fe, index: b.index, size: b.size, stamp: b.mtime / 1e9})
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
			c.logf("cache: %s was written with another format or block size; wiped it", c.tree)
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
		c.logf("cache: scan: %v", err)
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
			// Nothing to serve; a lone ETag is not worth a directory.
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
	fe := &fileEntry{key: key, dir: dir, onDisk: true}
	copy(fe.id[:], sum[:])
	var bs []scannedBlock
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		switch e.Name() {
		case keyName:
			continue
		case metaName:
			if mb, err := os.ReadFile(path); err == nil {
				if etag, err := decodeMeta(mb); err == nil {
					fe.meta, fe.hasMeta = etag, true
					continue
				}
			}
			c.removeStray(path, "bad meta file", removed)
			continue
		}
		n, ok := parseBlockName(e.Name())
		if !ok {
			c.removeStray(path, "unknown file", removed)
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // vanished: nothing to index
		}
		if size := info.Size() - hdrLen; !info.Mode().IsRegular() || size <= 0 || size > c.opts.BlockSize {
			c.removeStray(path, fmt.Sprintf("block file of %d bytes", info.Size()), removed)
			continue
		}
		bs = append(bs, scannedBlock{fe: fe, index: n, size: int32(info.Size() - hdrLen), mtime: info.ModTime().UnixNano()})
	}
	fe.blocks = make(map[int64]*blockEntry, len(bs))
	return fe, bs, nil
}

func (c *Cache) removeStray(path, why string, removed *atomic.Int64) {
	removed.Add(1)
	c.logf("cache: removing %s: %s", path, why)
	if err := os.RemoveAll(path); err != nil {
		c.logf("cache: %v", err)
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
