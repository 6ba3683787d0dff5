package cache

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// failingWrite returns a write hook that writes half of p, then fails with err; calls
// counts the failures.
func failingWrite(err error, calls *int) func(*os.File, []byte, int64) (int, error) {
	return func(f *os.File, p []byte, off int64) (int, error) {
		*calls++
		n, _ := f.WriteAt(p[:len(p)/2], off)
		return n, err
	}
}

func TestPutDiskFull(t *testing.T) {
	o := testOptions(t)
	o.MaxBytes = 64 * testBS
	c := openT(t, o)
	clk := &fakeClock{t: time.Now()}
	c.now = clk.now
	for b := int64(0); b < 40; b++ {
		put(t, c, keyA, b, testBS)
	}
	calls := 0
	c.writeAt = failingWrite(syscall.ENOSPC, &calls)
	err := c.Put(keyB, 0, blockOf(c, keyB, 0, testBS))
	if !errors.Is(err, ErrCacheFull) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Put on a full disk: %v, want ErrCacheFull and ENOSPC", err)
	}
	t.Logf("error: %v", err)
	if calls != 2 {
		t.Errorf("write tried %d times, want 2 (one retry after evicting)", calls)
	}
	wantMiss(t, c, keyB, 0)
	s := c.Stats()
	if s.WriteErrors != 1 || s.DiskFull != 2 || s.Corrupt != 0 {
		t.Errorf("stats %+v", s)
	}
	// The limit dropped below what was held, and eviction made room.
	if s.Limit >= 40*testBS || s.Bytes > s.Limit || s.Evictions == 0 {
		t.Errorf("after ENOSPC: Limit %d Bytes %d Evictions %d", s.Limit, s.Bytes, s.Evictions)
	}
	checkConsistent(t, c) // no temp file, no half-written block left behind

	// The disk has room again: Puts work, but the limit holds until fullRecovery.
	c.writeAt = (*os.File).WriteAt
	lowered := s.Limit
	for b := int64(100); b < 140; b++ {
		put(t, c, keyB, b, testBS)
	}
	if s := c.Stats(); s.Limit != lowered || s.Bytes > lowered {
		t.Errorf("limit moved before fullRecovery: %d (was %d), bytes %d", s.Limit, lowered, s.Bytes)
	}
	clk.t = clk.t.Add(fullRecovery)
	put(t, c, keyB, 200, testBS)
	if s := c.Stats(); s.Limit != o.MaxBytes {
		t.Errorf("limit %d after fullRecovery, want MaxBytes %d", s.Limit, o.MaxBytes)
	}
	wantHit(t, c, keyB, 200, testBS)
	checkConsistent(t, c)
}

// ENOSPC that only the retry escapes: the Put succeeds.
func TestPutDiskFullRetrySucceeds(t *testing.T) {
	c := openT(t, testOptions(t))
	for b := int64(0); b < 40; b++ {
		put(t, c, keyA, b, testBS)
	}
	calls := 0
	c.writeAt = func(f *os.File, p []byte, off int64) (int, error) {
		if calls++; calls == 1 {
			return 0, syscall.EDQUOT
		}
		return f.WriteAt(p, off)
	}
	put(t, c, keyB, 0, testBS)
	wantHit(t, c, keyB, 0, testBS)
	if s := c.Stats(); s.WriteErrors != 0 || s.DiskFull != 1 || s.Evictions == 0 {
		t.Errorf("stats %+v", s)
	}
	checkConsistent(t, c)
}

func TestPutIOError(t *testing.T) {
	c := openT(t, testOptions(t))
	put(t, c, keyA, 0, testBS)
	calls := 0
	c.writeAt = failingWrite(syscall.EIO, &calls)
	err := c.Put(keyA, 1, blockOf(c, keyA, 1, testBS))
	if !errors.Is(err, syscall.EIO) || errors.Is(err, ErrCacheFull) {
		t.Fatalf("Put with EIO: %v", err)
	}
	if calls != 1 {
		t.Errorf("an I/O error was retried (%d writes)", calls)
	}
	if err := c.SetValidator(keyB, Validator{ETag: `"e"`}); !errors.Is(err, syscall.EIO) {
		t.Errorf("SetValidator with EIO: %v", err)
	}
	if _, ok := c.Validator(keyB); ok {
		t.Error("failed SetValidator recorded")
	}
	wantMiss(t, c, keyA, 1)
	wantHit(t, c, keyA, 0, testBS)
	if s := c.Stats(); s.WriteErrors != 2 || s.Limit != c.opts.MaxBytes || s.Files != 1 {
		t.Errorf("stats %+v", s)
	}
	checkConsistent(t, c)
}

// A real full file system: a 2 MiB tmpfs under a cache that believes it may use 64 MiB.
func TestTmpfsFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=2m,mode=0700"); err != nil {
		t.Skipf("cannot mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })

	const bs = 64 << 10
	c := openT(t, Options{Dir: dir, BlockSize: bs, MaxBytes: 64 << 20})
	var full int
	for b := int64(0); b < 200; b++ {
		if err := c.Put(keyA, b, blockOf(c, keyA, b, bs)); err != nil {
			if !errors.Is(err, ErrCacheFull) {
				t.Fatalf("Put %d: %v", b, err)
			}
			full++
		}
	}
	s := c.Stats()
	t.Logf("200 Puts of 64 KiB on a 2 MiB tmpfs: %d failed; stats %+v", full, s)
	if s.DiskFull == 0 || s.Limit >= 2<<20 || s.Puts < 150 {
		t.Errorf("the cache did not adapt to the full disk: %+v", s)
	}
	for b := int64(0); b < 200; b++ {
		if c.Has(keyA, b) {
			wantHit(t, c, keyA, b, bs)
		} else {
			wantMiss(t, c, keyA, b)
		}
	}
	if s := c.Stats(); s.Corrupt != 0 {
		t.Errorf("Corrupt = %d", s.Corrupt)
	}
	checkConsistent(t, c)

	// Another program fills every byte the cache frees: eventually Put must fail with
	// ErrCacheFull, leaving no temp file, and what the cache holds still reads back.
	ballast, err := os.OpenFile(filepath.Join(dir, "ballast"), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer ballast.Close()
	chunk := make([]byte, 4<<10)
	var putErr error
	for b := int64(1000); b < 1020 && putErr == nil; b++ {
		for {
			if _, err := ballast.Write(chunk); err != nil {
				break
			}
		}
		putErr = c.Put(keyA, b, blockOf(c, keyA, b, bs))
	}
	if !errors.Is(putErr, ErrCacheFull) || !errors.Is(putErr, syscall.ENOSPC) {
		t.Fatalf("Put on a file system full of someone else's data: %v", putErr)
	}
	s = c.Stats()
	t.Logf("with ballast: %v; stats %+v", putErr, s)
	if s.WriteErrors == 0 || s.Limit != minLimitBlocks*bs {
		t.Errorf("stats %+v", s)
	}
	for b := int64(0); b < 1020; b++ {
		if c.Has(keyA, b) {
			wantHit(t, c, keyA, b, bs)
		}
	}
	checkConsistent(t, c) // includes: no temp files left
}

// A Put whose data lands but whose record write fails leaves no block: nothing vouches
// for the data, and its range is punched out. A failed rewrite of a stored block loses
// that block too (its old record was retired before its data was overwritten), never
// leaving a record over mixed bytes.
func TestPutRecordWriteFails(t *testing.T) {
	c := openT(t, testOptions(t))
	put(t, c, keyA, 0, testBS)
	put(t, c, keyA, 1, testBS)
	for _, b := range []int64{2, 1} { // a new block, then a rewrite
		calls := 0
		c.writeAt = func(f *os.File, p []byte, off int64) (int, error) {
			if calls++; calls == 2 { // the record, after the data
				n, _ := f.WriteAt(p[:len(p)/2], off)
				return n, syscall.EIO
			}
			return f.WriteAt(p, off)
		}
		if err := c.Put(keyA, b, blockOf(c, keyA, b, testBS)); !errors.Is(err, syscall.EIO) {
			t.Fatalf("Put block %d with a failing record write: %v", b, err)
		}
		c.writeAt = (*os.File).WriteAt
		if c.Has(keyA, b) || blockOnDisk(t, c, keyA, b) {
			t.Errorf("block %d: a failed Put left it indexed (%v) or on disk", b, c.Has(keyA, b))
		}
		wantMiss(t, c, keyA, b)
		checkConsistent(t, c)
	}
	wantHit(t, c, keyA, 0, testBS)
	if s := c.Stats(); s.Corrupt != 0 || s.WriteErrors != 2 || s.Blocks != 1 {
		t.Errorf("stats %+v", s)
	}
	// And it comes back.
	put(t, c, keyA, 1, testBS)
	wantHit(t, c, keyA, 1, testBS)
	checkConsistent(t, c)
}
