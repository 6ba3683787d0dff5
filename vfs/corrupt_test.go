package vfs_test

import (
	"context"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

// Cache files damaged behind the engine's back, while the FS is closed and while it has
// them open: every read still returns the right bytes (a damaged block is a miss and is
// fetched again), and the cache's counters say what it found: Stats.Corrupt for blocks a
// read found bad, Stats.ScanRemoved for records and files the startup scan dropped.

const (
	corruptBlock = 16 << 10
	corruptSize  = 32*corruptBlock - 1000 // 32 blocks, the last short
	corruptSeedA = 501
	corruptSeedB = 502
	corruptRead  = 25_000 // bytes per read: reads straddle blocks
)

// keyFiles returns the data and index files of the cached remote file at path.
func keyFiles(t *testing.T, cacheDir, path string) (data, index string) {
	t.Helper()
	keys, _ := filepath.Glob(filepath.Join(cacheDir, "v2", "*", "*", "key"))
	for _, k := range keys {
		b, err := os.ReadFile(k)
		if err != nil {
			t.Fatal(err)
		}
		var kf struct{ Path string }
		if err := json.Unmarshal(b, &kf); err != nil {
			t.Fatal(err)
		}
		if kf.Path == path {
			return filepath.Join(filepath.Dir(k), "data"), filepath.Join(filepath.Dir(k), "index")
		}
	}
	t.Fatalf("no cache directory for %s", path)
	return "", ""
}

// edit applies f to n bytes of file at off.
func edit(t *testing.T, file string, off int64, n int, f func([]byte)) {
	t.Helper()
	fh, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	p := make([]byte, n)
	if _, err := fh.ReadAt(p, off); err != nil {
		t.Fatal(err)
	}
	f(p)
	if _, err := fh.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
}

func flipByte(p []byte) { p[len(p)/2] ^= 0x40 }

// swapBytes exchanges n bytes at off of file a with n bytes at off2 of file b.
func swapBytes(t *testing.T, a string, off int64, b string, off2 int64, n int) {
	t.Helper()
	var x, y []byte
	edit(t, a, off, n, func(p []byte) { x = append([]byte(nil), p...) })
	edit(t, b, off2, n, func(p []byte) { y = append([]byte(nil), p...) })
	edit(t, a, off, n, func(p []byte) { copy(p, y) })
	edit(t, b, off2, n, func(p []byte) { copy(p, x) })
}

func renameSwap(t *testing.T, a, b string) {
	t.Helper()
	tmp := a + ".swap"
	for _, r := range [][2]string{{a, tmp}, {b, a}, {tmp, b}} {
		if err := os.Rename(r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
}

const recordLen = 64 // cache index record size (cache/format.go)

type damage struct {
	name string
	// do damages the cache files of a.bin (and sometimes b.bin).
	do func(t *testing.T, dataA, indexA, dataB, indexB string)
	// whileOpen: done while the FS runs, after a read made the cache open the files.
	// Deleting or renaming an open file changes nothing the cache can see until it
	// reopens it, so those are only done while closed.
	whileOpen bool
}

var damages = []damage{
	{"flip data byte", func(t *testing.T, d, _, _, _ string) { edit(t, d, 5*corruptBlock, 100, flipByte) }, true},
	{"flip index byte", func(t *testing.T, _, i, _, _ string) { edit(t, i, 7*recordLen, recordLen, flipByte) }, true},
	{"zero a record", func(t *testing.T, _, i, _, _ string) { edit(t, i, 3*recordLen, recordLen, func(p []byte) { clear(p) }) }, true},
	{"truncate data", func(t *testing.T, d, _, _, _ string) { os.Truncate(d, 20*corruptBlock+5) }, true},
	{"truncate index", func(t *testing.T, _, i, _, _ string) { os.Truncate(i, 10*recordLen+9) }, true},
	{"swap two blocks' data", func(t *testing.T, d, _, _, _ string) {
		swapBytes(t, d, 2*corruptBlock, d, 9*corruptBlock, corruptBlock)
	}, true},
	{"swap two records", func(t *testing.T, _, i, _, _ string) { swapBytes(t, i, 2*recordLen, i, 9*recordLen, recordLen) }, true},
	{"swap a block with another file's", func(t *testing.T, d, i, d2, i2 string) {
		swapBytes(t, d, 4*corruptBlock, d2, 4*corruptBlock, corruptBlock)
		swapBytes(t, i, 4*recordLen, i2, 4*recordLen, recordLen)
	}, true},
	{"delete data file", func(t *testing.T, d, _, _, _ string) { os.Remove(d) }, false},
	{"delete index file", func(t *testing.T, _, i, _, _ string) { os.Remove(i) }, false},
	{"swap data files of two remote files", func(t *testing.T, d, _, d2, _ string) { renameSwap(t, d, d2) }, false},
	{"swap index files of two remote files", func(t *testing.T, _, i, _, i2 string) { renameSwap(t, i, i2) }, false},
}

func TestCacheCorruptionThroughEngine(t *testing.T) {
	forWriteModes(t, testCacheCorruptionThroughEngine)
}

func testCacheCorruptionThroughEngine(t *testing.T, mode writeMode) {
	var runs, corrupt, removed, refetched int64
	root := t.TempDir()
	defer settleDir(t, root) // once for every subtest's cache (see settleDir)
	for _, d := range damages {
		for _, open := range []bool{false, true} {
			if open && !d.whileOpen {
				continue
			}
			name := d.name + "/closed"
			if open {
				name = d.name + "/open"
			}
			t.Run(name, func(t *testing.T) {
				c, r, f := runCorruption(t, root, d, open, mode)
				runs++
				corrupt, removed, refetched = corrupt+c, removed+r, refetched+f
			})
		}
	}
	figure(t, "%d damages, %d blocks found corrupt by reads (Stats.Corrupt), %d records/files dropped at open (Stats.ScanRemoved), %d ranges fetched again, 0 wrong bytes",
		runs, corrupt, removed, refetched)
}

// runCorruption caches a.bin and b.bin, damages their cache files, and reads both
// again, returning the counters' figures and the origin ranges opened for the rereads.
func runCorruption(t *testing.T, root string, d damage, whileOpen bool, mode writeMode) (corrupt, removed, refetched int64) {
	mem := memsrc.New()
	mem.AddPattern("a.bin", corruptSeedA, corruptSize)
	mem.AddPattern("b.bin", corruptSeedB, corruptSize)
	opts := vfs.DefaultOptions()
	dir, err := os.MkdirTemp(root, "cache")
	if err != nil {
		t.Fatal(err)
	}
	opts.Cache.Dir = dir
	opts.Cache.BlockSize = corruptBlock
	opts.Cache.MaxBytes = 16 << 20
	opts.ReadAhead.MaxWindow = 0 // fetch what is read: the cache holds exactly that
	mode.apply(&opts)
	newFSys := func() *vfs.FS {
		fsys, err := vfs.New(mem, opts)
		if err != nil {
			t.Fatal(err)
		}
		return fsys
	}
	readBoth := func(fsys *vfs.FS) {
		for _, fc := range []struct {
			path string
			seed uint64
		}{{"a.bin", corruptSeedA}, {"b.bin", corruptSeedB}} {
			f, err := fsys.Open(context.Background(), fc.path)
			if err != nil {
				t.Fatal(err)
			}
			for off := int64(0); off < corruptSize; off += corruptRead {
				if err := readAtVerify(f, fc.seed, off, corruptRead); err != nil {
					t.Fatalf("%s after %q: %v", fc.path, d.name, err)
				}
			}
			f.Close()
		}
	}
	// Fill the cache. A block a reader already has is not always written (the writer
	// skips it when the disk falls behind), so pass again until all 64 are there.
	fsys := newFSys()
	var filled cache.Stats
	for pass := 0; fsys.CacheStats().Blocks < 64; pass++ {
		if pass == 5 {
			t.Fatalf("cache holds %d blocks after %d passes, want 64", fsys.CacheStats().Blocks, pass)
		}
		readBoth(fsys)
		fsys.Close() // waits for the cache writes
		filled.DirectWrites += fsys.CacheStats().DirectWrites
		fsys = newFSys()
	}
	mode.check(t, filled)
	t.Cleanup(func() { fsys.Close() })
	dataA, indexA := keyFiles(t, opts.Cache.Dir, "a.bin")
	dataB, indexB := keyFiles(t, opts.Cache.Dir, "b.bin")
	if whileOpen {
		// One read of each file makes the cache open its files; damage them under it.
		readAtVerifyOpen(t, fsys, "a.bin", corruptSeedA)
		readAtVerifyOpen(t, fsys, "b.bin", corruptSeedB)
		d.do(t, dataA, indexA, dataB, indexB)
	} else {
		fsys.Close()
		d.do(t, dataA, indexA, dataB, indexB)
		fsys = newFSys()
	}
	before := mem.Stats().Opens
	readBoth(fsys)
	refetched = mem.Stats().Opens - before
	s := fsys.CacheStats()
	if s.Corrupt+s.ScanRemoved == 0 {
		t.Fatalf("%q: no counter saw the damage: %+v", d.name, s)
	}
	if refetched == 0 {
		t.Fatalf("%q: nothing was fetched again, yet the cache was damaged", d.name)
	}
	// A second pass is all hits: the damaged blocks were stored again, and nothing more
	// counts as corrupt. (Blocks the writer skipped because the disk fell behind, which
	// a loaded machine makes happen, are fetched again too.)
	// Blocks fetched again reach the cache behind their readers (fetch/writer.go): let
	// those writes land before the pass that expects them.
	for deadline := time.Now().Add(5 * time.Second); fsys.CacheStats().Blocks < 64 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	before = mem.Stats().Opens
	readBoth(fsys)
	if n, skipped := mem.Stats().Opens-before, fsys.FetchStats().CacheSkipped; n > skipped {
		t.Errorf("%q: second pass fetched %d ranges, %d blocks skipped by the writer; want no more (the cache heals)", d.name, n, skipped)
	}
	if s2 := fsys.CacheStats(); s2.Corrupt != s.Corrupt {
		t.Errorf("%q: Corrupt went from %d to %d on a clean pass", d.name, s.Corrupt, s2.Corrupt)
	}
	t.Logf("%q: Corrupt %d, ScanRemoved %d, %d ranges fetched again", d.name, s.Corrupt, s.ScanRemoved, refetched)
	return s.Corrupt, s.ScanRemoved, refetched
}

func readAtVerifyOpen(t *testing.T, fsys *vfs.FS, path string, seed uint64) {
	t.Helper()
	f, err := fsys.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := readAtVerify(f, seed, 0, 1000); err != nil {
		t.Fatal(err)
	}
}

// Damage while readers are reading: a goroutine keeps flipping random bytes of the
// cached data and index files, as fast as it can, while four readers read the file
// over and over. Every
// read is right (a block is checked after it is copied out, so damage after the check
// cannot reach the reader) and Stats.Corrupt counts what the readers ran into.
func TestCacheCorruptionUnderLoad(t *testing.T) { forWriteModes(t, testCacheCorruptionUnderLoad) }

func testCacheCorruptionUnderLoad(t *testing.T, mode writeMode) {
	passes := 3
	if longRun() {
		passes = 50
	}
	mem := memsrc.New()
	mem.AddPattern("a.bin", corruptSeedA, corruptSize)
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	opts.Cache.BlockSize = corruptBlock
	opts.Cache.MaxBytes = 16 << 20
	mode.apply(&opts)
	fsys, err := vfs.New(mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close(); settleDir(t, opts.Cache.Dir) })
	readAll := func(f *vfs.File) error {
		for off := int64(0); off < corruptSize; off += corruptRead {
			if err := readAtVerify(f, corruptSeedA, off, corruptRead); err != nil {
				return err
			}
		}
		return nil
	}
	f := open(t, fsys, "a.bin")
	if err := readAll(f); err != nil {
		t.Fatal(err)
	}
	fsys.Close() // lands every block, so the files exist
	mode.check(t, fsys.CacheStats())
	fsys, err = vfs.New(mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	data, index := keyFiles(t, opts.Cache.Dir, "a.bin")
	opensBefore := mem.Stats().Opens
	stop := make(chan struct{})
	damaged := make(chan int)
	go func() {
		rng := rand.New(rand.NewSource(1))
		n := 0
		defer func() { damaged <- n }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			file, size := data, int64(corruptSize)
			if i%3 == 0 {
				file, size = index, 32*recordLen
			}
			fh, err := os.OpenFile(file, os.O_RDWR, 0)
			if err != nil {
				continue // dropped and not yet written again
			}
			off := rng.Int63n(size)
			b := []byte{0}
			if _, err := fh.ReadAt(b, off); err == nil {
				b[0] ^= byte(1 + rng.Intn(255))
				if _, err := fh.WriteAt(b, off); err == nil {
					n++
				}
			}
			fh.Close()
		}
	}()
	var wg sync.WaitGroup
	var reads atomic.Int64
	for g := range 4 {
		wg.Go(func() {
			f, err := fsys.Open(context.Background(), "a.bin")
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for range passes {
				if err := readAll(f); err != nil {
					t.Errorf("reader %d: %v", g, err)
					return
				}
				reads.Add(corruptSize / corruptRead)
			}
		})
	}
	wg.Wait()
	close(stop)
	n := <-damaged
	s := fsys.CacheStats()
	fsys.Close()
	if n > 0 && s.Corrupt == 0 {
		t.Errorf("%d bytes flipped under the readers, Stats.Corrupt = 0", n)
	}
	figure(t, "%d bytes flipped while 4 readers made %d reads; Stats.Corrupt %d, %d ranges fetched again; 0 wrong bytes",
		n, reads.Load(), s.Corrupt, mem.Stats().Opens-opensBefore)
}
