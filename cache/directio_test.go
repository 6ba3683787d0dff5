package cache

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentPages reports how many pages of the file at path are in the page cache.
func residentPages(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() == 0 {
		return 0
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	ps := os.Getpagesize()
	vec := make([]byte, (len(mem)+ps-1)/ps)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// alignedBlock returns a buffer of n bytes aligned to a page, as the fetcher's pooled
// block buffers are.
func alignedBlock(n int) []byte {
	ps := os.Getpagesize()
	b := make([]byte, n+ps)
	skip := (ps - int(uintptr(unsafe.Pointer(&b[0]))%uintptr(ps))) % ps
	return b[skip : skip+n]
}

// requireDirect skips the test where the temp directory's file system takes no direct
// I/O (tmpfs before Linux 6.6): there the cache uses the page cache, which other tests
// cover.
func requireDirect(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, dataName)
	if err := os.WriteFile(p, nil, filePerm); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(p)
	f, align := directHandle(dir)
	if f == nil {
		t.Skipf("the file system of %s takes no direct I/O", dir)
	}
	f.Close()
	if testBS%align != 0 {
		t.Skipf("direct I/O there needs %d-byte alignment, above the test block size", align)
	}
}

// openDirect opens a test cache in a directory whose file system takes direct I/O, or
// skips the test (requireDirect).
func openDirect(t *testing.T) *Cache {
	t.Helper()
	o := testOptions(t)
	requireDirect(t, o.Dir)
	return openT(t, o)
}

// Whole blocks bypass the page cache on the way in and out (the mount's page cache
// already holds what readers got); they read back intact, and a short last block and
// an unaligned destination, which cannot go direct, still do.
func TestDirectIOKeepsBlocksOutOfPageCache(t *testing.T) {
	c := openDirect(t)
	const blocks = 8
	for b := range int64(blocks) {
		storeDirect(t, c, keyA, b)
	}
	put(t, c, keyA, blocks, 100) // the short last block: through the page cache
	data := filepath.Join(fileDir(c, keyA), dataName)
	if n := residentPages(t, data); n > 1 {
		t.Fatalf("%d pages of the data file in the page cache after %d direct block writes, want at most the short block's", n, blocks)
	}
	dst := alignedBlock(testBS)
	for b := range int64(blocks) {
		if n, ok := c.Get(context.Background(), keyA, b, dst); !ok || n != testBS || !bytes.Equal(dst, blockOf(c, keyA, b, testBS)) {
			t.Fatalf("block %d: %d bytes, hit %v, equal %v", b, n, ok, bytes.Equal(dst[:n], blockOf(c, keyA, b, testBS)))
		}
	}
	if n := residentPages(t, data); n > 1 {
		t.Fatalf("%d pages of the data file in the page cache after direct reads, want at most 1", n)
	}
	// A destination that is not aligned is read through the page cache.
	odd := make([]byte, testBS+1)[1:]
	if n, ok := c.Get(context.Background(), keyA, 3, odd); !ok || n != testBS || !bytes.Equal(odd, blockOf(c, keyA, 3, testBS)) {
		t.Fatalf("unaligned destination: %d bytes, hit %v", n, ok)
	}
	wantHit(t, c, keyA, blocks, 100)
	if c.noDirect.Load() {
		t.Fatal("direct I/O was given up")
	}
	if s := c.Stats(); s.Corrupt != 0 {
		t.Fatalf("%d corrupt blocks", s.Corrupt)
	}
}

// A block changed on disk behind the cache's back is a miss on a direct read too.
func TestDirectIOReadChecksData(t *testing.T) {
	c := openDirect(t)
	storeDirect(t, c, keyA, 2)
	f, err := os.OpenFile(filepath.Join(fileDir(c, keyA), dataName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{^blockOf(c, keyA, 2, testBS)[77]}, 2*testBS+77); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, ok := c.Get(context.Background(), keyA, 2, alignedBlock(testBS)); ok {
		t.Fatal("a block changed on disk was served")
	}
	if s := c.Stats(); s.Corrupt != 1 {
		t.Fatalf("Corrupt = %d, want 1", s.Corrupt)
	}
}

// A direct read that would wait for the file's lock (a cache write allocating, which
// may wait for a journal commit) reads through the page cache instead, and is counted.
func TestDirectReadThatWouldWaitGoesBuffered(t *testing.T) {
	c := openDirect(t)
	storeDirect(t, c, keyA, 1)
	c.readDirect = func(int, []byte, int64) error { return unix.EAGAIN }
	dst := alignedBlock(testBS)
	if n, ok := c.Get(context.Background(), keyA, 1, dst); !ok || n != testBS || !bytes.Equal(dst, blockOf(c, keyA, 1, testBS)) {
		t.Fatalf("busy direct read: %d bytes, hit %v", n, ok)
	}
	if s := c.Stats(); s.DirectBusy != 1 || s.Corrupt != 0 {
		t.Fatalf("DirectBusy %d, Corrupt %d; want 1, 0", s.DirectBusy, s.Corrupt)
	}
	if n := residentPages(t, filepath.Join(fileDir(c, keyA), dataName)); n == 0 {
		t.Fatal("the fallback read did not go through the page cache")
	}
	if c.noDirect.Load() {
		t.Fatal("a busy file gave up direct I/O")
	}
}

// putDirect stores data as PutSumDirect does, with its checksum.
func putDirect(c *Cache, key FileKey, block int64, data []byte) error {
	return c.PutSumDirect(key, block, data, Checksum(0, data))
}

// storeDirect stores the test pattern's block b of key with PutSumDirect, from an
// aligned buffer as the fetcher's are.
func storeDirect(t *testing.T, c *Cache, key FileKey, b int64) {
	t.Helper()
	data := alignedBlock(testBS)
	copy(data, blockOf(c, key, b, testBS))
	if err := putDirect(c, key, b, data); err != nil {
		t.Fatal(err)
	}
}

// Put and PutSum keep block data in the page cache, and read it back that way: only a
// writer that asks gets direct I/O, since a direct write can wait far longer.
func TestPutStaysBuffered(t *testing.T) {
	c := openDirect(t)
	for b := range int64(2) {
		data := alignedBlock(testBS)
		copy(data, blockOf(c, keyA, b, testBS))
		var err error
		if b == 0 {
			err = c.Put(keyA, b, data)
		} else {
			err = c.PutSum(keyA, b, data, Checksum(0, data))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(fileDir(c, keyA), dataName)
	if n := residentPages(t, path); n != 2*testBS/os.Getpagesize() {
		t.Fatalf("%d pages resident after two buffered writes, want %d", n, 2*testBS/os.Getpagesize())
	}
	c.readDirect = func(int, []byte, int64) error {
		t.Error("a block written through the page cache was read direct")
		return unix.EINVAL
	}
	wantHit(t, c, keyA, 0, testBS)
	wantHit(t, c, keyA, 1, testBS)
	// The same block written again direct is read direct.
	storeDirect(t, c, keyA, 1)
	directReads := 0
	c.readDirect = func(fd int, p []byte, off int64) error { directReads++; return preadNoWait(fd, p, off) }
	dst := alignedBlock(testBS)
	if n, ok := c.Get(context.Background(), keyA, 1, dst); !ok || n != testBS || !bytes.Equal(dst, blockOf(c, keyA, 1, testBS)) {
		t.Fatalf("block rewritten direct: %d bytes, hit %v", n, ok)
	}
	if directReads != 1 {
		t.Fatalf("%d direct reads of a block rewritten direct, want 1", directReads)
	}
	if s := c.Stats(); s.DirectWrites != 1 {
		t.Fatalf("DirectWrites = %d, want 1", s.DirectWrites)
	}
}

// BufferedIO keeps block data in the page cache even for PutSumDirect.
func TestBufferedIOOption(t *testing.T) {
	o := testOptions(t)
	o.BufferedIO = true
	c := openT(t, o)
	storeDirect(t, c, keyA, 0)
	if n := residentPages(t, filepath.Join(fileDir(c, keyA), dataName)); n != testBS/os.Getpagesize() {
		t.Fatalf("%d pages resident after a buffered write, want %d", n, testBS/os.Getpagesize())
	}
	wantHit(t, c, keyA, 0, testBS)
}

// A kernel that cannot read without waiting (preadv2 missing, or no RWF_NOWAIT for the
// file system) gets no more direct I/O: readers would wait behind direct writes. The
// block in hand is read through the page cache.
func TestNoNowaitReadsStopDirectIO(t *testing.T) {
	for _, errno := range []unix.Errno{unix.ENOSYS, unix.EOPNOTSUPP} {
		c := openDirect(t)
		storeDirect(t, c, keyA, 1)
		c.readDirect = func(int, []byte, int64) error { return errno }
		dst := alignedBlock(testBS)
		if n, ok := c.Get(context.Background(), keyA, 1, dst); !ok || n != testBS || !bytes.Equal(dst, blockOf(c, keyA, 1, testBS)) {
			t.Fatalf("%v: %d bytes, hit %v", errno, n, ok)
		}
		if !c.noDirect.Load() {
			t.Fatalf("%v: direct I/O still on", errno)
		}
		if s := c.Stats(); s.Corrupt != 0 {
			t.Fatalf("%v: %d corrupt blocks", errno, s.Corrupt)
		}
	}
}

// A direct write the file system refuses (EINVAL for an alignment it did not report,
// EOPNOTSUPP) is written through the page cache instead, and direct I/O stops.
func TestRefusedDirectWriteGoesBuffered(t *testing.T) {
	for _, errno := range []unix.Errno{unix.EINVAL, unix.EOPNOTSUPP} {
		c := openDirect(t)
		c.writeAt = func(f *os.File, p []byte, off int64) (int, error) {
			if fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0); err == nil && fl&unix.O_DIRECT != 0 {
				return 0, errno
			}
			return f.WriteAt(p, off)
		}
		data := alignedBlock(testBS)
		copy(data, blockOf(c, keyA, 2, testBS))
		if err := putDirect(c, keyA, 2, data); err != nil {
			t.Fatalf("%v: %v", errno, err)
		}
		if !c.noDirect.Load() {
			t.Fatalf("%v: direct I/O still on", errno)
		}
		if s := c.Stats(); s.DirectWrites != 0 || s.WriteErrors != 0 {
			t.Fatalf("%v: DirectWrites %d, WriteErrors %d; want 0, 0", errno, s.DirectWrites, s.WriteErrors)
		}
		wantHit(t, c, keyA, 2, testBS)
	}
}
