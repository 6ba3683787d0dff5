package fusefs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/testlog"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/vfs"
)

// blockingSource is a source whose ranges never come: every OpenRange waits until its
// context is done or release is closed. opened is closed at the first OpenRange.
type blockingSource struct {
	source.Source
	opened  chan struct{}
	once    sync.Once
	release chan struct{}
	freed   sync.Once
}

// free makes every OpenRange, waiting or future, fail at once.
func (b *blockingSource) free() { b.freed.Do(func() { close(b.release) }) }

func (b *blockingSource) OpenRange(ctx context.Context, p string, r source.Range, want source.Version) (source.Body, error) {
	b.once.Do(func() { close(b.opened) })
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.release:
		// Permanent, so the fetcher gives up at once instead of retrying to its timeout.
		return nil, fmt.Errorf("blockingSource released: %w", source.ErrPermission)
	}
}

// testLogger writes a logger's lines to t.Log.
func testLogger(t *testing.T) *slog.Logger { return testlog.New(t) }

// stopBound is how long Stop may take at most: its own grace periods plus slack for a
// loaded machine.
const stopBound = unmountGrace + serveGrace + 3*time.Second

// A mount stopped while a reader is blocked in a read (a player holding its file open on
// a silent origin) must come down within a bounded time, leave no mount and no stale
// mountpoint behind, and free the reader. Run with fusectl (the connection is aborted)
// and as if fusectl were missing (the mountpoint is only detached).
func TestStopWithReaderBlockedInRead(t *testing.T) {
	t.Run("fusectl", func(t *testing.T) { testStopBlockedRead(t, true) })
	t.Run("detach-only", func(t *testing.T) {
		defer func(f func(string) error) { abortFUSE = f }(abortFUSE)
		abortFUSE = func(string) error { return errors.New("fusectl disabled by the test") }
		testStopBlockedRead(t, false)
	})
}

func testStopBlockedRead(t *testing.T, wantAbort bool) {
	src := &blockingSource{Source: newMem(map[string]int64{"a.bin": 4 << 20}), opened: make(chan struct{}), release: make(chan struct{})}
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	opts.Cache.MaxBytes = 1 << 30
	opts.Fetch.IOTimeout = time.Minute // the read must still be blocked when Stop runs
	fsys, err := vfs.New(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	dir, server := mountRaw(t, fsys, MountOptions{})
	stopped := false
	t.Cleanup(func() {
		src.free()
		if !stopped {
			Stop(server, dir, nil)
		}
		closeBounded(t, fsys)
	})

	f, err := os.Open(filepath.Join(dir, "a.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	readDone := make(chan error, 1)
	go func() {
		_, err := f.ReadAt(make([]byte, 64<<10), 0)
		readDone <- err
	}()
	select {
	case <-src.opened:
	case err := <-readDone:
		t.Fatalf("read returned before the origin was asked: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the read never reached the origin")
	}

	log := testLogger(t)
	start := time.Now()
	res, err := Stop(server, dir, log)
	took := time.Since(start)
	stopped = true
	figure(t, "Stop with a reader blocked in a read: %s after %v (bound %v)", res, took.Round(time.Millisecond), stopBound)
	if res.Aborted {
		t.Log("case run: busy mount, connection aborted through fusectl, then detached")
	} else {
		t.Log("case run: busy mount, fusectl unavailable, detached only")
	}
	if err != nil {
		t.Errorf("Stop: %v", err)
	}
	if took > stopBound {
		t.Errorf("Stop took %v, bound %v", took, stopBound)
	}
	if wantAbort && !res.Aborted && os.Geteuid() == 0 {
		t.Errorf("running as root, yet the connection was not aborted")
	}
	if res.Unmounted {
		t.Errorf("a plain unmount succeeded while a file was open and a read blocked: the test tested nothing")
	}
	if stillMounted(dir) {
		t.Errorf("%s is still mounted after Stop", dir)
	}
	if IsStale(dir) {
		t.Errorf("%s is a stale mountpoint after Stop", dir)
	}
	if !res.Aborted {
		// The detached connection lives on while the file is open: the read waits for the
		// origin, which now fails it.
		src.free()
	}
	select {
	case err := <-readDone:
		t.Logf("the blocked read returned: %v", err)
		if err == nil {
			t.Errorf("the blocked read succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the blocked read still waits 5 s after Stop")
	}
}

// An idle mount stops with a plain unmount.
func TestStopIdleMountUnmounts(t *testing.T) {
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	fsys, err := vfs.New(newMem(map[string]int64{"a.bin": 1 << 20}), opts)
	if err != nil {
		t.Fatal(err)
	}
	dir, server := mountRaw(t, fsys, MountOptions{})
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			Stop(server, dir, nil)
		}
		closeBounded(t, fsys)
	})
	data, err := os.ReadFile(filepath.Join(dir, "a.bin"))
	if err != nil || len(data) != 1<<20 {
		t.Fatalf("read through the mount: %d bytes, %v", len(data), err)
	}
	verifyFile(t, filepath.Join(dir, "a.bin"), 0, data)
	res, err := Stop(server, dir, testLogger(t))
	stopped = true
	if err != nil || !res.Unmounted || !res.Served || res.Aborted || res.Detached {
		t.Errorf("Stop of an idle mount: %s, %v; want a plain unmount", res, err)
	}
	if stillMounted(dir) {
		t.Errorf("%s is still mounted", dir)
	}
}

// closeBounded closes fsys, failing the test if that takes more than a few seconds.
func closeBounded(t *testing.T, fsys *vfs.FS) {
	done := make(chan struct{})
	go func() { fsys.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Errorf("closing the FS took more than 10 s")
	}
}
