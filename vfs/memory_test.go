package vfs_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/vfs"
)

// treeSource is an origin with endless directories: every directory holds one
// subdirectory "d" and one file "f". It keeps no state, so the heap measured below is
// the FS's own.
type treeSource struct{}

var treeTime = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func (treeSource) Stat(ctx context.Context, p string) (source.Entry, error) {
	name := p[strings.LastIndex(p, "/")+1:]
	if name == "f" {
		return source.Entry{Name: name, Version: source.Version{Size: 1000, ModTime: treeTime}}, nil
	}
	return source.Entry{Name: name, IsDir: true, Version: source.AnyVersion}, nil
}

func (treeSource) List(ctx context.Context, p string) ([]source.Entry, error) {
	return []source.Entry{
		{Name: "d", IsDir: true, Version: source.AnyVersion, ModTime: treeTime},
		{Name: "f", Version: source.Version{Size: 1000, ModTime: treeTime}},
	}, nil
}

func (treeSource) OpenRange(ctx context.Context, p string, r source.Range, want source.Version) (source.Body, error) {
	return nil, fmt.Errorf("not needed")
}

func (treeSource) String() string { return "tree:" }

// TestMemoryBoundedOverManyDirectories: a daemon that lists 100,000 directories and
// stats 100,000 files keeps a bounded heap (listings and directory times are kept in
// LRUs), instead of one listing per directory ever seen.
func TestMemoryBoundedOverManyDirectories(t *testing.T) {
	const dirs = 100_000
	const bound = 48 << 20 // the LRUs' worst case is about a third of it
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	opts.ListTTL = time.Hour // nothing expires: only the bound can free listings
	fsys, err := vfs.New(treeSource{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	ctx := context.Background()
	before := heapAfterGC()
	for i := range dirs {
		dir := fmt.Sprintf("top%d/sub%d", i%100, i)
		if _, err := fsys.ReadDir(ctx, dir); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Stat(ctx, dir+"/f"); err != nil {
			t.Fatal(err)
		}
	}
	grew := int64(heapAfterGC()) - int64(before)
	figure(t, "heap grew %.1f MiB for %d directories listed and %d files statted (bound %d MiB)",
		float64(grew)/(1<<20), dirs, dirs, bound>>20)
	if grew > bound {
		t.Fatalf("heap grew %d MiB, more than %d MiB", grew>>20, bound>>20)
	}
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
