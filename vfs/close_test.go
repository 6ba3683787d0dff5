package vfs_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

// cacheFiles lists every file under dir with its size, sorted, so two snapshots compare.
func cacheFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file removed while walking: the next snapshot sees it
		}
		if info, ierr := d.Info(); ierr == nil && !d.IsDir() {
			out = append(out, fmt.Sprintf("%s %d", p, info.Size()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// missing returns the lines of a that b lacks.
func missing(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// settleDir waits until nothing changes under dir for a while (at most a few seconds).
//
// It works around the bug TestCloseStopsCacheWrites reports: FS.Close returns while the
// fetcher's streams and cache writers still run, and their late writes make t.TempDir's
// cleanup fail with "directory not empty". Other tests should fail for their own reasons.
func settleDir(t *testing.T, dir string) {
	const quiet, limit = 100 * time.Millisecond, 3 * time.Second
	prev := cacheFiles(t, dir)
	for start := time.Now(); time.Since(start) < limit; {
		time.Sleep(quiet)
		cur := cacheFiles(t, dir)
		if slices.Equal(cur, prev) {
			return
		}
		prev = cur
	}
}

// After File.Close and FS.Close return, playhead must not touch the cache directory:
// Close releases the cache's lock, so another process may open the directory (a
// remount), and a late write from this one would race with it. Nor may a caller's
// os.RemoveAll of the directory fail.
//
// A late write needs Close to land while a cache write is in flight, so the test tries
// a few times; one late write is enough to fail.
func TestCloseStopsCacheWrites(t *testing.T) {
	const rounds = 10
	for round := range rounds {
		dir := t.TempDir()
		before, after := closeWhileWriting(t, dir)
		if !slices.Equal(before, after) {
			t.Fatalf("round %d: cache directory changed after FS.Close returned:\ngone: %q\nnew: %q",
				round, missing(before, after), missing(after, before))
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatalf("removing the cache directory after Close: %v", err)
		}
	}
}

// closeWhileWriting streams a file until the cache writers are busy, closes the File
// and the FS, and returns the cache directory's files right after Close and a little
// later.
func closeWhileWriting(t *testing.T, dir string) (before, after []string) {
	const size = 64 << 20
	mem := memsrc.New()
	mem.AddPattern("a.bin", seed, size)
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = dir
	opts.Cache.MaxBytes = 256 << 20
	// The in-memory origin delivers faster than the cache disk writes, so the write
	// queue fills.
	fsys, err := vfs.New(memsrc.WithLatency(mem, rtt), opts)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Open(context.Background(), "a.bin")
	if err != nil {
		t.Fatal(err)
	}
	// Sequential reads grow the read-ahead window well past what has been read.
	for off := int64(0); off < 4<<20; off += 256 << 10 {
		if err := readAtVerify(f, seed, off, 256<<10); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	before = cacheFiles(t, dir)
	time.Sleep(50 * time.Millisecond) // a write in flight lands within a few ms
	return before, cacheFiles(t, dir)
}
