package fusefs

import (
	"errors"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

// mountMem mounts an in-memory source in a temporary directory. Without FUSE the test is
// skipped, unless PLAYHEAD_REQUIRE_FUSE=1 (CI), where it fails.
func mountMem(t *testing.T, mem source.Source) (dir string, fsys *vfs.FS) {
	t.Helper()
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	opts.Cache.MaxBytes = 1 << 30
	fsys, err := vfs.New(mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	return mountFS(t, fsys, MountOptions{}), fsys
}

// mountFS mounts fsys with o in a temporary directory and stops the mount and closes
// fsys when the test ends.
func mountFS(t *testing.T, fsys *vfs.FS, o MountOptions) string {
	t.Helper()
	dir, server := mountRaw(t, fsys, o)
	t.Cleanup(func() {
		if _, err := Stop(server, dir, testLogger(t)); err != nil {
			t.Errorf("unmount: %v", err)
		}
		fsys.Close()
	})
	return dir
}

// mountRaw mounts fsys with o in a temporary directory; stopping it is the caller's.
// Without FUSE the test is skipped, unless PLAYHEAD_REQUIRE_FUSE=1 (CI), where it fails.
func mountRaw(t *testing.T, fsys *vfs.FS, o MountOptions) (string, *fuse.Server) {
	t.Helper()
	dir := t.TempDir()
	server, err := Mount(fsys, dir, o)
	if err != nil {
		fsys.Close()
		if os.Getenv("PLAYHEAD_REQUIRE_FUSE") == "1" {
			t.Fatalf("FUSE required but mount failed: %v", err)
		}
		t.Skipf("FUSE not available: %v", err)
	}
	return dir, server
}

const seed = 11

func newMem(files map[string]int64) *memsrc.Source {
	mem := memsrc.New()
	for p, size := range files {
		mem.AddPattern(p, seed, size)
	}
	return mem
}

func TestListingAndAttributes(t *testing.T) {
	mem := newMem(map[string]int64{"a.bin": 5 << 20, "dir/b.bin": 1234, "dir/sub/c.bin": 0})
	dir, _ := mountMem(t, mem)
	st, err := os.Stat(filepath.Join(dir, "a.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 5<<20 || st.Mode().Perm() != 0o444 {
		t.Fatalf("a.bin: size %d mode %v", st.Size(), st.Mode())
	}
	names, err := os.ReadDir(filepath.Join(dir, "dir"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || names[0].Name() != "b.bin" || !names[1].IsDir() {
		t.Fatalf("dir listing: %v", names)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	// Read-only: writes get EROFS.
	_, err = os.OpenFile(filepath.Join(dir, "a.bin"), os.O_WRONLY, 0)
	if !errors.Is(err, syscall.EROFS) {
		t.Fatalf("open for write: %v, want EROFS", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("create: %v, want EROFS", err)
	}
}

func verifyFile(t *testing.T, path string, off int64, p []byte) {
	t.Helper()
	if err := pattern.Verify(seed, p, off); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestSequentialReadVerifiesEveryByte(t *testing.T) {
	const size = 20<<20 + 12345
	mem := newMem(map[string]int64{"a.bin": size})
	dir, _ := mountMem(t, memsrc.WithLatency(mem, 5*time.Millisecond))
	data, err := os.ReadFile(filepath.Join(dir, "a.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != size {
		t.Fatalf("read %d bytes, want %d", len(data), size)
	}
	verifyFile(t, "a.bin", 0, data)
}

func TestRandomAndConcurrentReaders(t *testing.T) {
	const size = 16 << 20
	mem := newMem(map[string]int64{"a.bin": size, "b.bin": size})
	dir, _ := mountMem(t, memsrc.WithLatency(mem, 2*time.Millisecond))
	var wg sync.WaitGroup
	for r := 0; r < 6; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			name := []string{"a.bin", "b.bin"}[r%2]
			f, err := os.Open(filepath.Join(dir, name))
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			rng := rand.New(rand.NewSource(int64(r)))
			for i := 0; i < 40; i++ {
				off := rng.Int63n(size)
				p := make([]byte, 1+rng.Intn(300<<10))
				n, err := f.ReadAt(p, off)
				if err != nil && err != io.EOF {
					t.Error(err)
					return
				}
				if want := min(int64(len(p)), size-off); int64(n) != want {
					t.Errorf("short read at %d: %d of %d", off, n, want)
					return
				}
				if err := pattern.Verify(seed, p[:n], off); err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
			}
		}(r)
	}
	wg.Wait()
}

// Four threads read one file in shuffled 128 KiB pieces, as a kernel serving one scan
// from several threads does; every byte must be right and the read-ahead must engage.
func TestShuffledPieces(t *testing.T) {
	const size = 24 << 20
	const piece = 128 << 10
	mem := newMem(map[string]int64{"a.bin": size})
	dir, fsys := mountMem(t, memsrc.WithLatency(mem, 5*time.Millisecond))
	f, err := os.Open(filepath.Join(dir, "a.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	offs := make(chan int64)
	go func() {
		rng := rand.New(rand.NewSource(1))
		for base := int64(0); base < size; base += 8 * piece {
			idx := rng.Perm(8)
			for _, i := range idx {
				offs <- base + int64(i)*piece
			}
		}
		close(offs)
	}()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, piece)
			for off := range offs {
				n, err := f.ReadAt(p, off)
				if err != nil && err != io.EOF {
					t.Error(err)
					return
				}
				if err := pattern.Verify(seed, p[:n], off); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// With read-ahead engaged the whole scan needs a handful of ranges, not one per piece.
	if st := fsys.FetchStats(); st.Requests > 20 {
		t.Fatalf("shuffled scan opened %d ranges; read-ahead did not engage", st.Requests)
	}
}

func TestStaleMountpointIsCleared(t *testing.T) {
	mem := newMem(map[string]int64{"a.bin": 1000})
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	fsys, err := vfs.New(mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	dir := t.TempDir()
	server, err := Mount(fsys, dir, MountOptions{})
	if err != nil {
		if os.Getenv("PLAYHEAD_REQUIRE_FUSE") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	// Simulate a crashed daemon: abort the connection without unmounting.
	abortConnection(t, dir)
	server.Wait()
	if !IsStale(dir) {
		t.Fatal("aborting the connection did not leave a stale mount")
	}
	server2, err := Mount(fsys, dir, MountOptions{})
	if err != nil {
		t.Fatalf("mount over a stale mountpoint: %v", err)
	}
	defer Stop(server2, dir, testLogger(t))
	if _, err := os.Stat(filepath.Join(dir, "a.bin")); err != nil {
		t.Fatal(err)
	}
}

// abortConnection writes to the FUSE connection's abort file in fusectl, which is what
// the kernel does to a mount whose daemon died.
func abortConnection(t *testing.T, dir string) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	ctl := "/sys/fs/fuse/connections"
	if _, err := os.Stat(ctl + "/"); err != nil {
		t.Skip("no fusectl")
	}
	entries, _ := os.ReadDir(ctl)
	if len(entries) == 0 {
		// fusectl not mounted; try to mount it.
		if err := syscall.Mount("fusectl", ctl, "fusectl", 0, ""); err != nil {
			t.Skipf("cannot mount fusectl: %v", err)
		}
	}
	dev := uint64(st.Dev)
	minor := (dev & 0xff) | ((dev >> 12) & 0xfff00)
	abort := filepath.Join(ctl, strconv.FormatUint(minor, 10), "abort")
	if err := os.WriteFile(abort, []byte("1"), 0); err != nil {
		t.Skipf("cannot abort connection: %v", err)
	}
}
