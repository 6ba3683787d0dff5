package integration

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playhead/playhead/origin"
)

// When the origin goes away, a read that needs it fails with EIO within the configured
// IO timeout instead of hanging the reader (and the player, and the file manager), while
// blocks already cached still read.
func TestUnreachableOrigin(t *testing.T) {
	const (
		size      = 32 << 20
		ioTimeout = 1 * time.Second
		deadline  = 5 * time.Second // IOTimeout plus slack for -race and kernel retries
		piece     = 64 << 10
	)
	o, url := startOrigin(t, map[string]origin.File{"a.bin": {Seed: 3, Size: size}})
	opts := testOptions(t)
	opts.Fetch.IOTimeout = ioTimeout
	m := mountHTTP(t, url, opts)
	f, err := os.Open(m.Path("a.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := readAtVerify(f, 3, size, 0, piece); err != nil {
		t.Fatal(err)
	}
	o.Close()

	start := time.Now()
	done := make(chan error, 1)
	go func() {
		// Far past what read-ahead fetched for the first read, and before the tail
		// fetched beside it.
		_, err := f.ReadAt(make([]byte, piece), size/2)
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(deadline):
		t.Fatalf("read of an uncached block with the origin down still blocked after %v (IOTimeout %v)",
			deadline, ioTimeout)
	}
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("read of an uncached block with the origin down: %v, want EIO", err)
	}
	t.Logf("uncached read failed after %v: %v", time.Since(start).Round(time.Millisecond), err)

	// The kernel's page cache would answer this read without asking playhead: drop it,
	// so the bytes must come from playhead's block cache.
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("fadvise: %v", err)
	}
	if err := readAtVerify(f, 3, size, 0, piece); err != nil {
		t.Errorf("cached block with the origin down: %v", err)
	}
}
