package cache

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Helpers that look at, and damage, the on-disk layout (see the package doc).

func dataFile(c *Cache, k FileKey) string { return filepath.Join(fileDir(c, k), dataName) }

func indexFile(c *Cache, k FileKey) string { return filepath.Join(fileDir(c, k), indexName) }

// recordOf returns the bytes of block b's record slot in the index file at path: nil if
// the file is missing or ends before the slot, short if it ends inside it.
func recordOf(t *testing.T, path string, b int64) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return nil
	}
	defer f.Close()
	p := make([]byte, recLen)
	n, err := f.ReadAt(p, b*recLen)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if n == 0 {
		return nil
	}
	return p[:n]
}

// hasData reports whether [off, off+n) of the file at path holds anything but holes.
func hasData(t *testing.T, path string, off, n int64) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return false
	}
	defer f.Close()
	d, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	if errors.Is(err, unix.ENXIO) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return d < off+n
}

// blockOnDisk reports whether anything of block b of k is on disk: its record or data.
func blockOnDisk(t *testing.T, c *Cache, k FileKey, b int64) bool {
	t.Helper()
	if r := recordOf(t, indexFile(c, k), b); r != nil && !isZero(r) {
		return true
	}
	return hasData(t, dataFile(c, k), b*c.opts.BlockSize, c.opts.BlockSize)
}

// modify applies f to n bytes of the file at path from off, in place.
func modify(t *testing.T, path string, off int64, n int, f func([]byte)) {
	t.Helper()
	file, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	p := make([]byte, n)
	if _, err := file.ReadAt(p, off); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	f(p)
	if _, err := file.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
}

// setStamp rewrites block b's record with a last-use stamp of tm (a valid record).
func setStamp(t *testing.T, c *Cache, k FileKey, b int64, tm time.Time) {
	t.Helper()
	modify(t, indexFile(c, k), b*recLen, recLen, func(p []byte) {
		r, err := decodeRecord(p)
		if err != nil {
			t.Fatal(err)
		}
		r.stamp = stampOf(tm.Unix())
		r.encode(p)
	})
}

// stampOn is the last-use stamp in block b's record on disk.
func stampOn(t *testing.T, c *Cache, k FileKey, b int64) time.Time {
	t.Helper()
	r, err := decodeRecord(recordOf(t, indexFile(c, k), b))
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(int64(r.stamp), 0)
}

// checkConsistent compares the index with the files on disk (call when quiet): every
// indexed block has a sound record and data, and nothing else is on disk.
func checkConsistent(t *testing.T, c *Cache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var bytes, blocks int64
	byDir := map[string]*fileEntry{}
	for k, fe := range c.files {
		if fe.key != k || fe.gone {
			t.Errorf("index: entry for %v is %v (gone=%v)", k, fe.key, fe.gone)
		}
		byDir[fe.dir] = fe
		for n, e := range fe.blocks {
			if e.index != n || e.file != fe || e.prev == nil {
				t.Errorf("index: %v block %d is inconsistent", k, n)
			}
			r, err := decodeRecord(recordOf(t, filepath.Join(fe.dir, indexName), n))
			if err == nil {
				err = r.check(fe.id, n, c.opts.BlockSize)
			}
			if err != nil {
				t.Errorf("%v block %d: indexed, but its record: %v", k, n, err)
			} else if r.dataLen != uint32(e.size) {
				t.Errorf("%v block %d: record says %d bytes, index %d", k, n, r.dataLen, e.size)
			} else {
				data := make([]byte, r.dataLen)
				f, err := os.Open(filepath.Join(fe.dir, dataName))
				if err == nil {
					_, err = f.ReadAt(data, n*c.opts.BlockSize)
					f.Close()
				}
				if err != nil || crc32Sum(data) != r.dataCRC {
					t.Errorf("%v block %d: indexed, but its data does not match its record (%v)", k, n, err)
				}
			}
			bytes += int64(e.size)
			blocks++
		}
	}
	if bytes != c.bytes || blocks != c.blocks {
		t.Errorf("index totals: bytes %d blocks %d, sum of entries %d %d", c.bytes, c.blocks, bytes, blocks)
	}
	listed := int64(0)
	for e := c.lru.root.next; e != &c.lru.root; e = e.next {
		listed++
	}
	if listed != c.blocks {
		t.Errorf("LRU lists %d blocks, index has %d", listed, c.blocks)
	}
	if c.bytes > c.limit {
		t.Errorf("bytes %d over limit %d", c.bytes, c.limit)
	}
	// Nothing on disk that the index does not know: no record, no data, no directory.
	dirs, _ := filepath.Glob(filepath.Join(c.tree, "*", "*"))
	for _, dir := range dirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() || filepath.Base(dir) == tmpName {
			continue
		}
		fe := byDir[dir]
		if fe == nil {
			t.Errorf("key directory on disk but not indexed: %s", dir)
			continue
		}
		idx, _ := os.ReadFile(filepath.Join(dir, indexName))
		for off := 0; off < len(idx); off += recLen {
			n := int64(off / recLen)
			if !isZero(idx[off:min(off+recLen, len(idx))]) && fe.blocks[n] == nil {
				t.Errorf("%v: record of block %d on disk but not indexed", fe.key, n)
			}
		}
		if st, err := os.Stat(filepath.Join(dir, dataName)); err == nil {
			for n := int64(0); n*c.opts.BlockSize < st.Size(); n++ {
				if fe.blocks[n] == nil && hasData(t, filepath.Join(dir, dataName), n*c.opts.BlockSize, c.opts.BlockSize) {
					t.Errorf("%v: data of block %d on disk but not indexed", fe.key, n)
				}
			}
		}
	}
	if tmp, _ := os.ReadDir(c.tmpDir); len(tmp) > 0 {
		t.Errorf("temp directory holds %d entries, want none", len(tmp))
	}
}
