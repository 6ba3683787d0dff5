package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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

// Cache files damaged while nothing is mounted (bit flips, a truncated block, a deleted
// one) are caught by their checksums: the file still reads back right, the bad blocks
// fetched again.
func TestCorruptCacheWhileUnmounted(t *testing.T) {
	const size = 4 << 20 // 16 blocks
	_, url := startOrigin(t, map[string]origin.File{"a.bin": {Seed: 9, Size: size}})
	opts := testOptions(t)
	first := mountHTTP(t, url, opts)
	verifyWhole(t, first.Path("a.bin"), 9, size)
	first.Unmount()

	blocks := blockFiles(t, opts.Cache.Dir)
	if len(blocks) < 8 {
		t.Fatalf("cache holds %d block files after reading 16 blocks, want at least 8", len(blocks))
	}
	for _, p := range blocks[:3] {
		flipByte(t, p, 100_000) // inside the data, past the 40-byte header
	}
	flipByte(t, blocks[3], 10) // inside the header
	if err := os.Truncate(blocks[4], 1000); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(blocks[5]); err != nil {
		t.Fatal(err)
	}

	second := mountHTTP(t, url, opts)
	verifyWhole(t, second.Path("a.bin"), 9, size)
	// Five files were damaged in place; how many of them a read meets (rather than a
	// read-ahead stream fetching past them) depends on timing, so only "some" is certain.
	if st := second.FS.CacheStats(); st.Corrupt == 0 {
		t.Errorf("cache stats after reading damaged blocks: %+v; want Corrupt > 0", st)
	}
}

// blockFiles returns the paths of every cached block file under dir, sorted.
func blockFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".blk") {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
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
