package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

// rtt is the fake origin's round trip: long enough that reads really wait on fetches
// in flight, short enough that a test makes hundreds of requests in well under a second.
const rtt = 2 * time.Millisecond

// newFS returns a FS over src with its cache in a temporary directory, closed when the
// test ends.
func newFS(t *testing.T, src source.Source) *vfs.FS {
	t.Helper()
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	opts.Cache.MaxBytes = 256 << 20
	// A transient failure should not keep a failing test waiting half a minute.
	opts.Fetch.IOTimeout = 5 * time.Second
	fsys, err := vfs.New(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		fsys.Close()
		settleDir(t, opts.Cache.Dir)
	})
	return fsys
}

// open opens p in fsys and closes it when the test ends (a second Close is harmless
// there: the test asserts ErrClosed itself where it matters).
func open(t *testing.T, fsys *vfs.FS, p string) *vfs.File {
	t.Helper()
	f, err := fsys.Open(context.Background(), p)
	if err != nil {
		t.Fatalf("Open(%q): %v", p, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// readAtVerify reads [off, off+n) of f and checks it against seed. It allows the short
// read and io.EOF that io.ReaderAt demands at the end of the file, and nothing else.
func readAtVerify(f *vfs.File, seed uint64, off int64, n int) error {
	p := make([]byte, n)
	got, err := f.ReadAt(p, off)
	want := int(max(min(int64(n), f.Size()-off), 0))
	switch {
	case got != want:
		return fmt.Errorf("ReadAt(%d bytes at %d) = %d, %v; want %d bytes", n, off, got, err, want)
	case got < n && err != io.EOF:
		return fmt.Errorf("ReadAt(%d bytes at %d): short read with %v, want io.EOF", n, off, err)
	case got == n && err != nil && err != io.EOF:
		return fmt.Errorf("ReadAt(%d bytes at %d): %w", n, off, err)
	}
	return pattern.Verify(seed, p[:got], off)
}

const seed = 21

func TestReadAtRandomRanges(t *testing.T) {
	const size = 6<<20 + 12345 // not a multiple of the block size: the last block is short
	mem := memsrc.New()
	mem.AddPattern("a.bin", seed, size)
	f := open(t, newFS(t, memsrc.WithLatency(mem, rtt)), "a.bin")
	if f.Size() != size {
		t.Fatalf("Size() = %d, want %d", f.Size(), size)
	}
	rng := rand.New(rand.NewSource(1))
	for i := range 120 {
		off := rng.Int63n(size)
		n := 1 + rng.Intn(700<<10)
		if i%10 == 0 {
			off = size - int64(rng.Intn(1000)) - 1 // ranges that cross the end
		}
		if err := readAtVerify(f, seed, off, n); err != nil {
			t.Fatalf("read %d at %d: %v", n, off, err)
		}
	}
}

func TestReadSeekFullCopy(t *testing.T) {
	const size = 5<<20 + 777
	mem := memsrc.New()
	mem.AddPattern("a.bin", seed, size)
	f := open(t, newFS(t, memsrc.WithLatency(mem, rtt)), "a.bin")

	var _ io.ReadSeeker = f
	var buf bytes.Buffer
	// io.Copy with a small buffer, so the copy is many sequential Reads.
	n, err := io.CopyBuffer(&buf, struct{ io.Reader }{f}, make([]byte, 100<<10))
	if err != nil || n != size {
		t.Fatalf("copy: %d bytes, %v; want %d", n, err, size)
	}
	if err := pattern.Verify(seed, buf.Bytes(), 0); err != nil {
		t.Fatal(err)
	}

	// Seek in every mode, then Read from there.
	for _, c := range []struct {
		off    int64
		whence int
		want   int64
	}{
		{1 << 20, io.SeekStart, 1 << 20},
		{-4096, io.SeekCurrent, 1<<20 + 1000 - 4096}, // after the 1000-byte read below
		{-500, io.SeekEnd, size - 500},
		{3<<20 + 1, io.SeekStart, 3<<20 + 1},
	} {
		pos, err := f.Seek(c.off, c.whence)
		if err != nil || pos != c.want {
			t.Fatalf("Seek(%d, %d) = %d, %v; want %d", c.off, c.whence, pos, err, c.want)
		}
		p := make([]byte, 1000)
		k, err := io.ReadFull(f, p)
		want := int(min(1000, size-pos))
		if k != want || (want == 1000 && err != nil) {
			t.Fatalf("Read after Seek to %d: %d bytes, %v; want %d", pos, k, err, want)
		}
		if err := pattern.Verify(seed, p[:k], pos); err != nil {
			t.Fatalf("after Seek to %d: %v", pos, err)
		}
	}
	if _, err := f.Seek(-1, io.SeekStart); err == nil {
		t.Fatal("Seek to a negative offset succeeded")
	}
}

func TestConcurrentReadAt(t *testing.T) {
	const size = 12 << 20
	mem := memsrc.New()
	mem.AddPattern("a.bin", seed, size)
	f := open(t, newFS(t, memsrc.WithLatency(mem, rtt)), "a.bin")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewSource(int64(g)))
			// Half the readers stream sequentially, half jump: both kinds share one handle.
			off := int64(g) * (size / 8)
			for range 40 {
				n := 1 + rng.Intn(300<<10)
				if g%2 == 1 {
					off = rng.Int63n(size)
				}
				if err := readAtVerify(f, seed, off, n); err != nil {
					t.Errorf("reader %d: %v", g, err)
					return
				}
				off = (off + int64(n)) % size
			}
		})
	}
	wg.Wait()
}

func TestCloseTwiceAndReadAfterClose(t *testing.T) {
	mem := memsrc.New()
	mem.AddPattern("a.bin", seed, 1000)
	fsys := newFS(t, mem)
	f, err := fsys.Open(context.Background(), "a.bin")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := f.Close(); !errors.Is(err, vfs.ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
	if _, err := f.ReadAt(make([]byte, 10), 0); !errors.Is(err, vfs.ErrClosed) {
		t.Fatalf("ReadAt after Close: %v, want ErrClosed", err)
	}
	if _, err := f.Read(make([]byte, 10)); !errors.Is(err, vfs.ErrClosed) {
		t.Fatalf("Read after Close: %v, want ErrClosed", err)
	}
}

func TestReadPastEOF(t *testing.T) {
	const size = 300<<10 + 5
	mem := memsrc.New()
	mem.AddPattern("a.bin", seed, size)
	mem.AddPattern("empty", seed, 0)
	fsys := newFS(t, mem)
	f := open(t, fsys, "a.bin")
	p := make([]byte, 100)
	for _, off := range []int64{size, size + 1, size + 1<<20} {
		if n, err := f.ReadAt(p, off); n != 0 || err != io.EOF {
			t.Errorf("ReadAt at %d (size %d) = %d, %v; want 0, io.EOF", off, size, n, err)
		}
	}
	// A range that crosses the end: the bytes there, then io.EOF.
	if n, err := f.ReadAt(p, size-10); n != 10 || err != io.EOF {
		t.Errorf("ReadAt across the end = %d, %v; want 10, io.EOF", n, err)
	} else if err := pattern.Verify(seed, p[:n], size-10); err != nil {
		t.Error(err)
	}
	// Read and Seek: the last bytes, then io.EOF on every later Read.
	if _, err := f.Seek(-3, io.SeekEnd); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Read(p); n != 3 || err != nil {
		t.Errorf("Read of the last 3 bytes = %d, %v", n, err)
	}
	for range 2 {
		if n, err := f.Read(p); n != 0 || err != io.EOF {
			t.Errorf("Read at the end = %d, %v; want 0, io.EOF", n, err)
		}
	}
	if _, err := f.Seek(size+100, io.SeekStart); err != nil {
		t.Fatalf("Seek past the end: %v (allowed by io.Seeker)", err)
	}
	if n, err := f.Read(p); n != 0 || err != io.EOF {
		t.Errorf("Read past the end = %d, %v; want 0, io.EOF", n, err)
	}
	e := open(t, fsys, "empty")
	if n, err := e.Read(p); n != 0 || err != io.EOF {
		t.Errorf("Read of an empty file = %d, %v; want 0, io.EOF", n, err)
	}
}
