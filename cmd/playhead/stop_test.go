package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/fusefs"
	"github.com/playhead/playhead/internal/testlog"
)

// stallingOrigin lists one file, a.bin of 1 MiB, and never answers a request for its
// bytes: a player reading it blocks in read(2).
func stallingOrigin(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`[{"name":"a.bin","type":"file","mtime":"Mon, 01 Jan 2024 10:00:00 GMT","size":1048576}]`))
			return
		}
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { close(stop); srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

// isMounted reports whether dir is a mountpoint, from mountinfo (never asking a FUSE
// daemon that may be gone).
func isMounted(dir string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// SIGTERM or SIGINT while a player is blocked reading a file of the mount: the daemon
// must exit within a bounded time, leave neither a mount nor a stale mountpoint, free
// the player, and say what it did.
func TestSignalWithReaderBlockedLeavesNoStaleMount(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("PLAYHEAD_REQUIRE_FUSE") == "1" {
			t.Fatalf("FUSE required but /dev/fuse is missing: %v", err)
		}
		t.Skip("no /dev/fuse")
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) { testSignalBlockedReader(t, sig) })
	}
}

func testSignalBlockedReader(t *testing.T, sig syscall.Signal) {
	const exitBound = 15 * time.Second // Stop's own bounds are 2 s + 5 s
	origin := stallingOrigin(t)
	tmp := t.TempDir()
	mp := filepath.Join(tmp, "mp")
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "mount", "--cache-dir", filepath.Join(tmp, "cache"),
		"--io-timeout", "1m", origin, mp)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var stderr testlog.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{}) // closed once the process is gone; waitErr is then set
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// Whatever happened, leave nothing behind: a dead daemon's connection is aborted
		// by the kernel, and its mountpoint is detached here.
		cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Errorf("playhead did not die after SIGKILL")
		}
		if isMounted(mp) {
			syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	})

	for start := time.Now(); !isMounted(mp); time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("playhead exited before mounting: %v\n%s", waitErr, stderr.String())
		default:
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("not mounted after 10 s:\n%s", stderr.String())
		}
	}
	readDone := make(chan error, 1)
	go func() {
		f, err := os.Open(filepath.Join(mp, "a.bin"))
		if err != nil {
			readDone <- err
			return
		}
		defer f.Close()
		_, err = f.Read(make([]byte, 64<<10))
		readDone <- err
	}()
	select {
	case err := <-readDone:
		t.Fatalf("the read returned from a stalling origin: %v", err)
	case <-time.After(500 * time.Millisecond): // the read is blocked
	}

	start := time.Now()
	cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(exitBound):
		t.Fatalf("playhead still running %v after %s with a reader blocked:\n%s", exitBound, sig, stderr.String())
	}
	took := time.Since(start)
	err := waitErr
	out := stderr.String()
	t.Logf("exit after %s: %v after %v\n%s", sig, err, took.Round(time.Millisecond), out)
	if err != nil {
		t.Errorf("playhead exited with %v after %s", err, sig)
	}
	if isMounted(mp) {
		t.Errorf("%s is still mounted after playhead exited", mp)
	}
	if fusefs.IsStale(mp) {
		t.Errorf("%s is a stale mountpoint after playhead exited", mp)
	}
	if !strings.Contains(out, "stopped mount") {
		t.Errorf("the log does not say how the mount was stopped")
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if _, steps, ok := strings.Cut(sc.Text(), "steps="); ok && strings.Contains(sc.Text(), "stopped mount") {
			figure(t, "%s with a reader blocked in read(2): exit %v after %v, mount stopped by: %s; no mount or stale mountpoint left",
				sig, err, took.Round(time.Millisecond), steps)
		}
	}
	select {
	case err := <-readDone:
		if err == nil {
			t.Errorf("the blocked read succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the blocked reader is still blocked 5 s after playhead exited")
	}
}
