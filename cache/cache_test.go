package cache

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pattern"
)

const testBS = 4 << 10 // small blocks keep the tests fast

var (
	keyA = FileKey{Source: "http://origin.test/", Path: "films/a.mkv", Version: "1000000-1700000000"}
	keyB = FileKey{Source: "http://origin.test/", Path: "films/b.mkv", Version: "2000000-1700000001"}
)

// seedOf gives each key its own pattern, so a block served for the wrong key fails Verify.
func seedOf(k FileKey) uint64 {
	s := k.sum()
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}

func testOptions(t *testing.T) Options {
	return Options{Dir: t.TempDir(), BlockSize: testBS, MaxBytes: 1 << 20}
}

func openT(t *testing.T, o Options) *Cache {
	t.Helper()
	c, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// blockOf is block b of key's pattern file, n bytes long.
func blockOf(c *Cache, k FileKey, b int64, n int) []byte {
	p := make([]byte, n)
	pattern.Fill(seedOf(k), p, b*c.opts.BlockSize)
	return p
}

func put(t *testing.T, c *Cache, k FileKey, b int64, n int) {
	t.Helper()
	if err := c.Put(k, b, blockOf(c, k, b, n)); err != nil {
		t.Fatalf("Put %v block %d: %v", k, b, err)
	}
}

func wantHit(t *testing.T, c *Cache, k FileKey, b int64, n int) {
	t.Helper()
	dst := make([]byte, c.opts.BlockSize)
	got, ok := c.Get(context.Background(), k, b, dst)
	if !ok {
		t.Fatalf("Get %v block %d: miss, want hit", k, b)
	}
	if got != n {
		t.Fatalf("Get %v block %d: %d bytes, want %d", k, b, got, n)
	}
	if err := pattern.Verify(seedOf(k), dst[:got], b*c.opts.BlockSize); err != nil {
		t.Fatalf("Get %v block %d: %v", k, b, err)
	}
}

func wantMiss(t *testing.T, c *Cache, k FileKey, b int64) {
	t.Helper()
	dst := make([]byte, c.opts.BlockSize)
	if n, ok := c.Get(context.Background(), k, b, dst); ok {
		t.Fatalf("Get %v block %d: hit with %d bytes, want miss", k, b, n)
	}
}

func fileDir(c *Cache, k FileKey) string { return keyDir(c.tree, k.sum()) }

func TestRoundTrip(t *testing.T) {
	c := openT(t, testOptions(t))
	const nblocks, last = 100, 1234 // last block is short
	for b := int64(0); b < nblocks; b++ {
		put(t, c, keyA, b, testBS)
	}
	put(t, c, keyA, nblocks, last)
	for b := int64(0); b < nblocks; b++ {
		wantHit(t, c, keyA, b, testBS)
	}
	wantHit(t, c, keyA, nblocks, last)
	wantMiss(t, c, keyA, nblocks+1)
	if !c.Has(keyA, 7) || c.Has(keyA, nblocks+1) || c.Has(keyB, 7) {
		t.Error("Has disagrees with what was stored")
	}
	s := c.Stats()
	if s.Hits != nblocks+1 || s.Misses != 1 || s.Puts != nblocks+1 || s.Corrupt != 0 {
		t.Errorf("stats %+v", s)
	}
	if want := int64(nblocks*testBS + last); s.Bytes != want || s.Blocks != nblocks+1 || s.Files != 1 {
		t.Errorf("Bytes %d Blocks %d Files %d, want %d %d 1", s.Bytes, s.Blocks, s.Files, want, nblocks+1)
	}
	// Overwriting a block keeps one copy.
	put(t, c, keyA, 3, testBS)
	if s := c.Stats(); s.Blocks != nblocks+1 {
		t.Errorf("after overwrite Blocks = %d", s.Blocks)
	}
	checkConsistent(t, c)
}

func TestPutRejectsBadBlocks(t *testing.T) {
	c := openT(t, testOptions(t))
	for _, tc := range []struct {
		b int64
		n int
	}{{-1, 10}, {0, 0}, {0, testBS + 1}} {
		if err := c.Put(keyA, tc.b, make([]byte, tc.n)); err == nil {
			t.Errorf("Put block %d of %d bytes succeeded", tc.b, tc.n)
		}
	}
}

func TestGetShortDst(t *testing.T) {
	c := openT(t, testOptions(t))
	put(t, c, keyA, 0, testBS)
	put(t, c, keyA, 1, 100)
	if _, ok := c.Get(context.Background(), keyA, 0, make([]byte, testBS-1)); ok {
		t.Error("Get into a short buffer succeeded")
	}
	if n, ok := c.Get(context.Background(), keyA, 1, make([]byte, 100)); !ok || n != 100 {
		t.Errorf("Get of a short block into a buffer of its size: %d %v", n, ok)
	}
	if s := c.Stats(); s.Corrupt != 0 || !c.Has(keyA, 0) {
		t.Errorf("a short buffer was blamed on the block: %+v", s)
	}
}

func TestRestart(t *testing.T) {
	o := testOptions(t)
	c := openT(t, o)
	for b := int64(0); b < 20; b++ {
		put(t, c, keyA, b, testBS)
	}
	put(t, c, keyA, 20, 77)
	put(t, c, keyB, 5, testBS)
	if err := c.SetValidator(keyA, Validator{ETag: `"etag-1"`}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(o); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open of an open dir: %v, want ErrInUse", err)
	}
	before := c.Stats()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(keyA, 30, make([]byte, 10)); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}

	var logged bytes.Buffer
	o.Logger = slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c = openT(t, o)
	s := c.Stats()
	if s.Blocks != before.Blocks || s.Bytes != before.Bytes || s.Files != 2 {
		t.Errorf("after restart %+v, before %+v", s, before)
	}
	if s.ScanTime <= 0 || logged.Len() == 0 {
		t.Errorf("scan time %v not reported (log %q)", s.ScanTime, logged.String())
	}
	for b := int64(0); b < 20; b++ {
		wantHit(t, c, keyA, b, testBS)
	}
	wantHit(t, c, keyA, 20, 77)
	wantHit(t, c, keyB, 5, testBS)
	if v, ok := c.Validator(keyA); !ok || v != (Validator{ETag: `"etag-1"`}) {
		t.Errorf("Validator after restart = %+v %v", v, ok)
	}
	if _, ok := c.Validator(keyB); ok {
		t.Error("Validator of a key never set")
	}
	checkConsistent(t, c)
}

func TestFormatChangeWipes(t *testing.T) {
	o := testOptions(t)
	c := openT(t, o)
	put(t, c, keyA, 0, testBS)
	c.Close()
	o.BlockSize *= 2
	c = openT(t, o)
	if s := c.Stats(); s.Blocks != 0 {
		t.Fatalf("blocks of another block size survived: %+v", s)
	}
	wantMiss(t, c, keyA, 0)
	if _, err := os.Stat(fileDir(c, keyA)); !os.IsNotExist(err) {
		t.Errorf("old key directory still there: %v", err)
	}
}

func TestVersionsIsolated(t *testing.T) {
	c := openT(t, testOptions(t))
	v1 := keyA
	v2 := keyA
	v2.Version = "1000001-1700000000" // the remote file changed size
	v3 := keyA
	v3.Source = "http://mirror.test/" // same path at another origin
	put(t, c, v1, 0, testBS)
	wantMiss(t, c, v2, 0)
	wantMiss(t, c, v3, 0)
	put(t, c, v2, 0, testBS)
	wantHit(t, c, v1, 0, testBS)
	wantHit(t, c, v2, 0, testBS)
	if err := c.Forget(v2); err != nil {
		t.Fatal(err)
	}
	wantHit(t, c, v1, 0, testBS)
	wantMiss(t, c, v2, 0)
}

func TestForget(t *testing.T) {
	c := openT(t, testOptions(t))
	for b := int64(0); b < 10; b++ {
		put(t, c, keyA, b, testBS)
		put(t, c, keyB, b, testBS)
	}
	if err := c.SetValidator(keyA, Validator{ETag: `"x"`}); err != nil {
		t.Fatal(err)
	}
	if err := c.Forget(keyA); err != nil {
		t.Fatal(err)
	}
	for b := int64(0); b < 10; b++ {
		wantMiss(t, c, keyA, b)
		wantHit(t, c, keyB, b, testBS)
	}
	if _, ok := c.Validator(keyA); ok {
		t.Error("Validator survived Forget")
	}
	if _, err := os.Stat(fileDir(c, keyA)); !os.IsNotExist(err) {
		t.Errorf("directory survived Forget: %v", err)
	}
	if s := c.Stats(); s.Blocks != 10 || s.Bytes != 10*testBS || s.Corrupt != 0 {
		t.Errorf("stats after Forget %+v", s)
	}
	if err := c.Forget(keyA); err != nil {
		t.Errorf("second Forget: %v", err)
	}
	put(t, c, keyA, 2, testBS)
	wantHit(t, c, keyA, 2, testBS)
	checkConsistent(t, c)
}

func TestMeta(t *testing.T) {
	c := openT(t, testOptions(t))
	if err := c.SetValidator(keyA, Validator{ETag: `W/"1"`}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetValidator(keyA, Validator{ETag: `"2"`}); err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Validator(keyA); !ok || v != (Validator{ETag: `"2"`}) {
		t.Errorf("Validator = %+v %v", v, ok)
	}
	b, err := os.ReadFile(filepath.Join(fileDir(c, keyA), metaName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeMeta(b[:len(b)-1]); err == nil {
		t.Error("a torn meta file decodes")
	}
}

func TestOpenRemovesLeftovers(t *testing.T) {
	o := testOptions(t)
	c := openT(t, o)
	put(t, c, keyA, 0, testBS)
	put(t, c, keyB, 0, testBS)
	c.Close()

	tree := filepath.Join(o.Dir, treeName)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// As a kill -9 leaves them: temp files, a directory being deleted, a stray file.
	must(os.WriteFile(filepath.Join(tree, tmpName, "17"), []byte("half a block"), 0o600))
	must(os.MkdirAll(filepath.Join(tree, tmpName, "18.gone", "x"), 0o700))
	must(os.WriteFile(filepath.Join(fileDir(c, keyA), "data.tmp"), nil, 0o600))
	// A record too long to be a block (its checksum is right), and a record torn by the
	// end of the index file.
	modify(t, indexFile(c, keyA), 1*recLen, recLen, func(p []byte) {
		r := record{keyID: c.files[keyA].id, block: 1, blockSize: testBS, dataLen: testBS + 1}
		r.encode(p)
	})
	modify(t, indexFile(c, keyA), 2*recLen, 4, func(p []byte) { copy(p, "tiny") })
	// Data no record vouches for (a crash between the data and the record of a Put).
	modify(t, dataFile(c, keyA), 3*testBS, testBS, func(p []byte) { copy(p, "orphan") })
	// keyB's directory loses its key file: nothing in it can be trusted.
	must(os.Remove(filepath.Join(fileDir(c, keyB), keyName)))
	// Junk in a fan-out directory.
	must(os.MkdirAll(filepath.Join(tree, "ab"), 0o700))
	must(os.WriteFile(filepath.Join(tree, "ab", "junk"), nil, 0o600))
	must(os.MkdirAll(filepath.Join(tree, "ab", "ab"+strings.Repeat("0", 70)), 0o700))

	c = openT(t, o)
	if tmp, _ := os.ReadDir(filepath.Join(tree, tmpName)); len(tmp) != 0 {
		t.Errorf("temp directory not emptied: %d entries", len(tmp))
	}
	for _, p := range []string{
		filepath.Join(fileDir(c, keyA), "data.tmp"), fileDir(c, keyB), filepath.Join(tree, "ab", "junk"),
	} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s survived Open: %v", p, err)
		}
	}
	for b := int64(1); b <= 3; b++ {
		if blockOnDisk(t, c, keyA, b) {
			t.Errorf("block %d: damaged record or orphan data survived Open", b)
		}
	}
	// 2 temp entries, data.tmp, 2 bad records, the orphan data, keyB's directory, 2 junk.
	if s := c.Stats(); s.ScanRemoved != 9 || s.Blocks != 1 {
		t.Errorf("ScanRemoved %d Blocks %d, want 9 and 1", s.ScanRemoved, s.Blocks)
	}
	wantHit(t, c, keyA, 0, testBS)
	wantMiss(t, c, keyB, 0)
	checkConsistent(t, c)
}

// The one-file-per-block tree of format 1 is deleted, unless an older playhead has it.
func TestOpenRemovesOldTree(t *testing.T) {
	o := testOptions(t)
	old := filepath.Join(o.Dir, oldTreeName)
	blk := filepath.Join(old, "3f", strings.Repeat("3f", 32), "0.blk")
	if err := os.MkdirAll(filepath.Dir(blk), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blk, make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(old, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	c := openT(t, o)
	if _, err := os.Stat(blk); err != nil {
		t.Errorf("an old tree in use was touched: %v", err)
	}
	c.Close()
	lock.Close()
	openT(t, o)
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("old tree survived Open: %v", err)
	}
}

func TestIndexMemoryPerBlock(t *testing.T) {
	const n = 80000 // 20 GiB of 256 KiB blocks
	c := &Cache{files: map[FileKey]*fileEntry{}, limit: 1 << 62}
	c.lru.init()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fe := c.fileFor(keyA, keyA.sum())
	c.mu.Lock()
	for i := range int64(n) {
		c.addLocked(&blockEntry{file: fe, index: i, size: DefaultBlockSize})
	}
	c.mu.Unlock()
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("index: %.0f bytes per block", per)
	if per > 100 {
		t.Errorf("index costs %.0f bytes per block, want under 100", per)
	}
	runtime.KeepAlive(c)
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{Dir: "x"}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	d := DefaultOptions()
	if d.BlockSize != 256<<10 || d.MaxBytes != 20<<30 {
		t.Errorf("DefaultOptions = %+v", d)
	}
	for _, o := range []Options{
		{},
		{Dir: "x", BlockSize: 100},
		{Dir: "x", BlockSize: 1 << 30},
		{Dir: "x", BlockSize: testBS, MaxBytes: 3 * testBS},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", o)
		}
		if _, err := Open(o); err == nil {
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
}

func TestFileKeyNoCollisionAcrossFields(t *testing.T) {
	a := FileKey{Source: "a", Path: "bc", Version: "1"}
	b := FileKey{Source: "ab", Path: "c", Version: "1"}
	if a.sum() == b.sum() {
		t.Error("keys that differ only in where a field ends hash alike")
	}
	if !strings.Contains(a.String(), "bc") {
		t.Errorf("String() = %q", a.String())
	}
}

// fakeClock is an injected clock for the time-dependent rules.
type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time { return f.t }
