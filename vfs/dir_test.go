package vfs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// treeFiles is a small tree: files at the root, in a directory and in a subdirectory.
var treeFiles = map[string]int64{
	"a.bin":         3<<20 + 1,
	"b.bin":         1234,
	"empty":         0,
	"dir/c.bin":     700 << 10,
	"dir/sub/d.bin": 42,
}

func newTree(hideSizes bool) *memsrc.Source {
	mem := memsrc.New()
	for p, size := range treeFiles {
		mem.AddPattern(p, seed, size)
	}
	mem.HideListSizes(hideSizes)
	return mem
}

// describe renders a listing as "name size" lines ("name/" for directories), for
// comparison in one line.
func describe(es []source.Entry) []string {
	var out []string
	for _, e := range es {
		if e.IsDir {
			out = append(out, e.Name+"/")
		} else {
			out = append(out, fmt.Sprintf("%s %d", e.Name, e.Version.Size))
		}
	}
	return out
}

func TestReadDirAndStat(t *testing.T) {
	ctx := context.Background()
	fsys := newFS(t, newTree(false))
	for _, c := range []struct {
		dir  string
		want []string
	}{
		{"", []string{"a.bin 3145729", "b.bin 1234", "dir/", "empty 0"}},
		{"/", []string{"a.bin 3145729", "b.bin 1234", "dir/", "empty 0"}},
		{"dir", []string{"c.bin 716800", "sub/"}},
		{"dir/sub/", []string{"d.bin 42"}},
	} {
		es, err := fsys.ReadDir(ctx, c.dir)
		if err != nil {
			t.Fatalf("ReadDir(%q): %v", c.dir, err)
		}
		if got := describe(es); !slices.Equal(got, c.want) {
			t.Errorf("ReadDir(%q) = %q, want %q (sorted by name, exact sizes)", c.dir, got, c.want)
		}
	}
	for p, size := range treeFiles {
		e, err := fsys.Stat(ctx, p)
		if err != nil || e.IsDir || e.Version.Size != size {
			t.Errorf("Stat(%q) = %+v, %v; want a file of %d bytes", p, e, err, size)
		}
	}
	if e, err := fsys.Stat(ctx, "dir/sub"); err != nil || !e.IsDir {
		t.Errorf("Stat(dir/sub) = %+v, %v; want a directory", e, err)
	}
	for _, p := range []string{"missing", "dir/missing", "dir/sub/d.bin.x"} {
		if _, err := fsys.Stat(ctx, p); !errors.Is(err, source.ErrNotFound) {
			t.Errorf("Stat(%q) = %v, want ErrNotFound", p, err)
		}
	}
	if _, err := fsys.Open(ctx, "dir"); err == nil {
		t.Error("Open of a directory succeeded")
	}
	if _, err := fsys.Open(ctx, "nope.bin"); !errors.Is(err, source.ErrNotFound) {
		t.Errorf("Open of a missing file: %v, want ErrNotFound", err)
	}
}

// A listing without sizes (an HTML index without exact sizes) is completed by Stat:
// every file's size is right through Stat and Open, and the origin is asked once per
// file, not once per call.
func TestListingWithoutSizesStatFills(t *testing.T) {
	ctx := context.Background()
	mem := newTree(true)
	fsys := newFS(t, mem)
	es, err := fsys.ReadDir(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describe(es), []string{"a.bin -1", "b.bin -1", "dir/", "empty -1"}; !slices.Equal(got, want) {
		t.Fatalf("ReadDir = %q, want %q (sizes unknown until Stat)", got, want)
	}
	for range 3 {
		for p, size := range treeFiles {
			e, err := fsys.Stat(ctx, p)
			if err != nil || e.Version.Size != size {
				t.Fatalf("Stat(%q) = %+v, %v; want size %d", p, e, err, size)
			}
		}
	}
	if got := mem.Stats().Stats; got != int64(len(treeFiles)) {
		t.Errorf("origin Stat calls = %d, want %d (one per file, then remembered)", got, len(treeFiles))
	}
	f := open(t, fsys, "a.bin")
	if f.Size() != treeFiles["a.bin"] {
		t.Errorf("opened size %d, want %d", f.Size(), treeFiles["a.bin"])
	}
	if err := readAtVerify(f, seed, f.Size()-100, 200); err != nil {
		t.Error(err)
	}
}

// ReadDir and Stat of a listing without sizes, from many goroutines at once, as a media
// scanner walking a tree does. Stat completes the cached listing while ReadDir and
// other Stats read it; under -race any unguarded access shows, and without -race the
// runtime may stop with "concurrent map iteration and map write".
func TestConcurrentStatAndReadDirWithoutSizes(t *testing.T) {
	ctx := context.Background()
	mem := memsrc.New()
	const n = 512
	name := func(i int) string { return fmt.Sprintf("f%03d", i) }
	for i := range n {
		mem.AddPattern(name(i), seed, int64(1000+i))
	}
	mem.HideListSizes(true)
	fsys := newFS(t, mem)
	if _, err := fsys.ReadDir(ctx, ""); err != nil { // cache the listing
		t.Fatal(err)
	}
	statsDone := make(chan struct{})
	var readers, staters sync.WaitGroup
	for range 4 {
		// Readers list until every size is filled in: only then can no Stat write.
		readers.Go(func() {
			for {
				select {
				case <-statsDone:
					return
				default:
				}
				if es, err := fsys.ReadDir(ctx, ""); err != nil || len(es) != n {
					t.Errorf("ReadDir = %d entries, %v; want %d", len(es), err, n)
					return
				}
			}
		})
	}
	for g := range 4 {
		staters.Go(func() {
			for i := g; i < n; i += 4 {
				e, err := fsys.Stat(ctx, name(i))
				if err != nil || e.Version.Size != int64(1000+i) {
					t.Errorf("Stat(%s) = %+v, %v", name(i), e, err)
					return
				}
			}
		})
	}
	staters.Wait()
	close(statsDone)
	readers.Wait()
}
