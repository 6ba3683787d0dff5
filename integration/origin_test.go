package integration

import (
	"math/rand"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/origin"
)

// originTree is the tree the origin tests serve: sizes that are and are not multiples
// of the block size, an empty file and a one-byte file, in nested directories.
var originTree = map[string]int64{
	"a.bin":          8 << 20,
	"b.mkv":          5<<20 + 12345,
	"empty":          0,
	"one":            1,
	"dir/c.bin":      3<<20 + 7,
	"dir/sub/d.bin":  2 << 20,
	"dir/sub/e.bin":  256<<10 + 1,
	"other/f.bin":    4<<20 - 1,
	"other/g h.bin":  100 << 10, // a space in the name: escaped in the URL
	"other/ünï.bin":  70 << 10,  // non-ASCII
	"other/h%20.bin": 10,        // a literal "%20" in the name, not a space
}

// seedOf gives every file its own seed, so a block served for the wrong file is caught.
func seedOf(p string) uint64 {
	var h uint64 = 1469598103934665603
	for i := 0; i < len(p); i++ {
		h = (h ^ uint64(p[i])) * 1099511628211
	}
	return h
}

// serveTree starts the built-in origin over files and mounts it.
func serveTree(t *testing.T, files map[string]int64) (*origin.Server, *mount) {
	t.Helper()
	of := make(map[string]origin.File, len(files))
	for p, size := range files {
		of[p] = origin.File{Seed: seedOf(p), Size: size}
	}
	o, url := startOrigin(t, of)
	return o, mountHTTP(t, url, testOptions(t))
}

func TestOriginListing(t *testing.T) {
	_, m := serveTree(t, originTree)
	for _, dir := range []string{"", "dir", "dir/sub", "other"} {
		got, want := listing(t, m.Path(dir)), wantListing(originTree, dir)
		if !slices.Equal(got, want) {
			t.Errorf("listing of %q:\n got %q\nwant %q", dir, got, want)
		}
	}
	for p, size := range originTree {
		st, err := os.Stat(m.Path(p))
		if err != nil || st.Size() != size || !st.Mode().IsRegular() {
			t.Errorf("stat %s: %v, %v; want a regular file of %d bytes", p, st, err, size)
		}
	}
}

func TestOriginSequentialCat(t *testing.T) {
	_, m := serveTree(t, originTree)
	for p, size := range originTree {
		verifyWhole(t, m.Path(p), seedOf(p), size)
	}
}

func TestOriginRandomReadAt(t *testing.T) {
	const p = "b.mkv"
	_, m := serveTree(t, originTree)
	if err := randomReads(m.Path(p), seedOf(p), originTree[p], 1, 150, 400<<10); err != nil {
		t.Fatal(err)
	}
}

// Four readers, each reading a different file to the end at the same time.
func TestOriginConcurrentFiles(t *testing.T) {
	files := []string{"a.bin", "b.mkv", "dir/c.bin", "other/f.bin"}
	_, m := serveTree(t, originTree)
	var wg sync.WaitGroup
	for _, p := range files {
		wg.Go(func() {
			data, err := os.ReadFile(m.Path(p))
			if err != nil {
				t.Errorf("%s: %v", p, err)
				return
			}
			if int64(len(data)) != originTree[p] {
				t.Errorf("%s: %d bytes, want %d", p, len(data), originTree[p])
			}
			if err := pattern.Verify(seedOf(p), data, 0); err != nil {
				t.Errorf("%s: %v", p, err)
			}
		})
	}
	wg.Wait()
}

// Four threads read one file in shuffled 128 KiB pieces, as a kernel serving one scan
// from several threads does; every byte must be right.
func TestOriginShuffledPieces(t *testing.T) {
	const (
		p     = "a.bin"
		piece = 128 << 10
		group = 8 // pieces shuffled among themselves: a window a scan jitters within
	)
	size := originTree[p]
	_, m := serveTree(t, originTree)
	f, err := os.Open(m.Path(p))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	offs := make(chan int64)
	go func() {
		defer close(offs)
		rng := rand.New(rand.NewSource(1))
		for base := int64(0); base < size; base += group * piece {
			for _, i := range rng.Perm(group) {
				offs <- base + int64(i)*piece
			}
		}
	}()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for off := range offs {
				if err := readAtVerify(f, seedOf(p), size, off, piece); err != nil {
					t.Error(err)
					for range offs { // let the producer finish
					}
					return
				}
			}
		})
	}
	wg.Wait()
}
