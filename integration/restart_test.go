package integration

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/origin"
	"github.com/playhead/playhead/source/memsrc"
)

// A file read once is read again after a restart (new mount, same cache directory)
// without a byte from the origin.
func TestRestartReadsFromCache(t *testing.T) {
	const size = 6<<20 + 333
	o, url := startOrigin(t, map[string]origin.File{"dir/a.bin": {Seed: 5, Size: size}})
	opts := testOptions(t)

	first := mountHTTP(t, url, opts)
	verifyWhole(t, first.Path("dir/a.bin"), 5, size)
	first.Unmount()

	second := mountHTTP(t, url, opts)
	// The new mount must list the directory (the origin is the only place names come
	// from); the file's bytes must then all come from the cache.
	if got := listing(t, second.Path("dir")); !slices.Equal(got, []string{"a.bin 6291789"}) {
		t.Fatalf("listing after restart: %q", got)
	}
	before := o.Stats()
	verifyWhole(t, second.Path("dir/a.bin"), 5, size)
	after := quiescentStats(o)
	if got := after.BytesWritten - before.BytesWritten; got != 0 {
		t.Errorf("reading a cached file after a restart took %d bytes from the origin (%d requests), want 0",
			got, after.Requests-before.Requests)
	}
	if st := second.FS.FetchStats(); st.BytesFetched != 0 || st.BlocksCached == 0 {
		t.Errorf("fetch stats after restart: %+v; want nothing fetched, blocks from the cache", st)
	}
}

// The same with an origin that lists but fails every range: the bytes can only come
// from the cache.
func TestRestartWithOriginFailingRanges(t *testing.T) {
	const size = 3<<20 + 5
	mem := memsrc.New()
	mem.AddPattern("a.bin", 7, size)
	opts := testOptions(t)
	// Both mounts use a faults wrapper, so the source's name (part of the cache key) is
	// the same; the second one fails every OpenRange.
	first := mountSource(t, memsrc.WithFaults(mem, memsrc.FaultPlan{}), opts)
	verifyWhole(t, first.Path("a.bin"), 7, size)
	first.Unmount()

	mem.ResetStats()
	second := mountSource(t, memsrc.WithFaults(mem, memsrc.FaultPlan{FailRate: 1}), opts)
	verifyWhole(t, second.Path("a.bin"), 7, size)
	if st := mem.Stats(); st.BytesServed != 0 {
		t.Errorf("origin served %d bytes after the restart, want 0", st.BytesServed)
	}
}

// Cache files damaged while nothing is mounted (bit flips in block data and in an index
// record, a truncated data file, a deleted record) are caught by their checksums: the
// file still reads back right, the bad blocks fetched again.
func TestCorruptCacheWhileUnmounted(t *testing.T) {
	const size = 4 << 20 // 16 blocks
	_, url := startOrigin(t, map[string]origin.File{"a.bin": {Seed: 9, Size: size}})
	opts := testOptions(t)
	first := mountHTTP(t, url, opts)
	verifyWhole(t, first.Path("a.bin"), 9, size)
	first.Unmount()

	dirs := cachedFiles(t, opts.Cache.Dir)
	if len(dirs) != 1 {
		t.Fatalf("cache holds %d key directories after reading one file, want 1", len(dirs))
	}
	dir := dirs[0]
	blocks := cachedBlocks(t, dir)
	if len(blocks) < 8 {
		t.Fatalf("cache holds %d blocks after reading 16, want at least 8", len(blocks))
	}
	bs := opts.Cache.BlockSize
	if bs == 0 {
		bs = cache.DefaultBlockSize
	}
	data, index := filepath.Join(dir, "data"), filepath.Join(dir, "index")
	for _, b := range blocks[:3] {
		flipByte(t, data, b*bs+100_000) // inside the block's data
	}
	flipByte(t, index, blocks[3]*cacheRecLen+10) // inside the block's record
	// Cut the data file inside the last cached block.
	if err := os.Truncate(data, blocks[len(blocks)-1]*bs+1000); err != nil {
		t.Fatal(err)
	}
	// Delete a block's record.
	zeroRange(t, index, blocks[4]*cacheRecLen, cacheRecLen)

	second := mountHTTP(t, url, opts)
	verifyWhole(t, second.Path("a.bin"), 9, size)
	// Six blocks were damaged in place; how many of them a read meets (rather than a
	// read-ahead stream fetching past them, or the restart scan dropping them) depends
	// on timing, so only "some" is certain.
	if st := second.FS.CacheStats(); st.Corrupt == 0 {
		t.Errorf("cache stats after reading damaged blocks: %+v; want Corrupt > 0", st)
	}
}

// cacheRecLen is the size of a block's record in a key directory's index file (see the
// cache package doc): the record of block b is at b*cacheRecLen.
const cacheRecLen = 64

// cachedFiles returns the key directories (one per cached file version) under dir.
func cachedFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "index" {
			out = append(out, filepath.Dir(p))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// cachedBlocks returns the numbers of the blocks with a record in the key directory
// dir, in order.
func cachedBlocks(t *testing.T, dir string) []int64 {
	t.Helper()
	index, err := os.ReadFile(filepath.Join(dir, "index"))
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for off := 0; off+cacheRecLen <= len(index); off += cacheRecLen {
		if slices.ContainsFunc(index[off:off+cacheRecLen], func(b byte) bool { return b != 0 }) {
			out = append(out, int64(off/cacheRecLen))
		}
	}
	return out
}

// flipByte inverts the byte at off of the file at p.
func flipByte(t *testing.T, p string, off int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// zeroRange overwrites n bytes at off of the file at p with zeros.
func zeroRange(t *testing.T, p string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, n), off); err != nil {
		t.Fatal(err)
	}
}
