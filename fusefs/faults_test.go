package fusefs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/faultorigin"
	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source/httpsrc"
	"github.com/playhead/playhead/vfs"
)

// Origin faults as a program sees them through the mount: an origin that stops
// answering fails read(2) with EIO within IOTimeout and the next read after it answers
// again succeeds; a file replaced at the origin fails reads of the old open file with
// ESTALE (or gives old bytes), never new ones, and a new open reads the new file.

const faultsIOTimeout = 300 * time.Millisecond

var faultsTime = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// mountOrigin mounts origin through httpsrc with a short IOTimeout and listing TTL 0.
func mountOrigin(t *testing.T, origin *faultorigin.Server) string {
	t.Helper()
	src, err := httpsrc.New(origin.URL, httpsrc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	opts.Cache.MaxBytes = 1 << 30
	opts.Fetch.IOTimeout = faultsIOTimeout
	opts.Fetch.RetryMin = time.Millisecond
	opts.Fetch.RetryMax = 10 * time.Millisecond
	opts.ListTTL = -1
	fsys, err := vfs.New(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	return mountFS(t, fsys, MountOptions{})
}

// figure prints a reliability figure line for t, "RELIABILITY <test name>: <text>",
// which scripts/reliability.sh collects into docs/RELIABILITY.md (see
// integration/figures_test.go).
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("RELIABILITY %s: %s", t.Name(), fmt.Sprintf(format, args...))
}

func TestMountOriginOutageIsEIO(t *testing.T) {
	const size = 8 << 20
	origin := faultorigin.New()
	t.Cleanup(origin.Close)
	origin.Put("a.bin", 3, size, faultsTime)
	dir := mountOrigin(t, origin)
	f, err := os.Open(filepath.Join(dir, "a.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := make([]byte, 4096)
	if _, err := f.ReadAt(p, 0); err != nil {
		t.Fatal(err)
	}
	origin.SetScript(func(int, string) faultorigin.Fault { return faultorigin.Fault{Kind: faultorigin.Status503} })
	start := time.Now()
	_, err = f.ReadAt(p, 4<<20)
	took := time.Since(start)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("read during an outage: %v, want EIO", err)
	}
	if took > faultsIOTimeout+3*time.Second {
		t.Fatalf("read during an outage took %v, IOTimeout %v", took, faultsIOTimeout)
	}
	origin.SetScript(nil)
	// Far from the failed read's blocks, which fail at once for a short while.
	if _, err := f.ReadAt(p, 6<<20); err != nil {
		t.Fatalf("read after the outage: %v", err)
	}
	if err := pattern.Verify(3, p, 6<<20); err != nil {
		t.Fatal(err)
	}
	figure(t, "read failed with %v after %v (%d faulted requests); next read recovered",
		err, took.Round(time.Millisecond), origin.Faults())
}

func TestMountObjectChangedIsESTALE(t *testing.T) {
	const size = 8 << 20
	origin := faultorigin.New()
	t.Cleanup(origin.Close)
	origin.Put("a.bin", 3, size, faultsTime)
	dir := mountOrigin(t, origin)
	path := filepath.Join(dir, "a.bin")
	old, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	p := make([]byte, 64<<10)
	if _, err := old.ReadAt(p, 0); err != nil {
		t.Fatal(err)
	}
	origin.Put("a.bin", 4, size, faultsTime.Add(time.Hour))
	n, staleErr := old.ReadAt(p, 6<<20)
	if !errors.Is(staleErr, syscall.ESTALE) {
		t.Fatalf("old open file after a replace: %d bytes, %v; want ESTALE", n, staleErr)
	}
	if verr := pattern.Verify(3, p[:n], 6<<20); verr != nil {
		t.Fatalf("old open file returned new bytes: %v", verr)
	}
	fresh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	for _, off := range []int64{0, 6 << 20} {
		if _, err := fresh.ReadAt(p, off); err != nil {
			t.Fatalf("new open at %d: %v", off, err)
		}
		if err := pattern.Verify(4, p, off); err != nil {
			t.Fatalf("new open at %d: %v", off, err)
		}
	}
	figure(t, "old open file got %v, new open read the new file", staleErr)
}
