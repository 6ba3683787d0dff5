package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeDaemon writes a shell script standing in for `playhead mount URL DIR ...`.
func fakeDaemon(t *testing.T, body string) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "fake-playhead")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

func request(t *testing.T) MountRequest {
	dir := t.TempDir()
	return MountRequest{OriginURL: "http://127.0.0.1:1/", CacheDir: filepath.Join(dir, "cache"),
		Dir: dir, ReadyFile: "media/a.mkv"}
}

func TestProcessMountsSamplesAndStops(t *testing.T) {
	// Like the daemon: the file appears in the mountpoint ($3), SIGTERM ends it cleanly.
	exe := fakeDaemon(t, `trap 'exit 0' TERM
mkdir -p "$3/media" && echo x > "$3/media/a.mkv"
while :; do sleep 0.02; done`)
	sut := &ProcessSUT{Exe: exe, ReadyTimeout: 5 * time.Second, StopTimeout: 5 * time.Second}
	m, err := sut.Mount(t.Context(), request(t))
	if err != nil {
		t.Fatal(err)
	}
	if rss, err := m.PeakRSS(); err != nil || rss <= 0 {
		t.Errorf("PeakRSS = %d, %v", rss, err)
	}
	if _, err := m.CPU(); err != nil {
		t.Errorf("CPU: %v", err)
	}
	if err := m.Unmount(); err != nil {
		t.Errorf("Unmount: %v", err)
	}
}

func TestProcessThatExitsQuotesItsOutput(t *testing.T) {
	exe := fakeDaemon(t, `echo "playhead: origin unreachable: connection refused" >&2; exit 1`)
	sut := &ProcessSUT{Exe: exe, ReadyTimeout: 5 * time.Second}
	_, err := sut.Mount(t.Context(), request(t))
	if err == nil || !strings.Contains(err.Error(), "exited before the mount answered") ||
		!strings.Contains(err.Error(), "origin unreachable") {
		t.Errorf("err = %v, want the exit and the daemon's words", err)
	}
}

func TestProcessNeverReadyTimesOutAndIsKilled(t *testing.T) {
	// Ignores SIGTERM too: Unmount must fall back to SIGKILL.
	exe := fakeDaemon(t, `trap '' TERM; echo "still probing" >&2; while :; do sleep 0.02; done`)
	sut := &ProcessSUT{Exe: exe, ReadyTimeout: 300 * time.Millisecond, StopTimeout: 200 * time.Millisecond}
	start := time.Now()
	_, err := sut.Mount(t.Context(), request(t))
	if err == nil || !strings.Contains(err.Error(), "not ready after") || !strings.Contains(err.Error(), "still probing") {
		t.Errorf("err = %v, want a timeout quoting the daemon", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestProcfsOfSelf(t *testing.T) {
	rss, err := peakRSS(os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Errorf("peakRSS = %d, %v", rss, err)
	}
	if _, err := cpuTime(os.Getpid()); err != nil {
		t.Error(err)
	}
	if !isMounted("/") || isMounted(t.TempDir()) {
		t.Error("isMounted is wrong about / or a temp dir")
	}
	if got := unescapeMountinfo(`/tmp/a\040b`); got != "/tmp/a b" {
		t.Errorf("unescape = %q", got)
	}
}

func TestCheckFresh(t *testing.T) {
	root := t.TempDir()
	write := func(p string, mtime time.Time) {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte("package x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(full, mtime, mtime)
	}
	built := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+ModulePath+"\n\ngo 1.26\n"), 0o644)
	write("fetch/fetch.go", built.Add(-time.Hour))
	write("fetch/fetch_test.go", built.Add(time.Hour)) // tests do not go into the binary
	write(".git/hook.go", built.Add(time.Hour))        // hidden
	write("x/testdata/gen.go", built.Add(time.Hour))   // testdata
	write("cache/cache.go", built.Add(time.Second/2))  // same second as the stamp
	sub := filepath.Join(root, "cmd", "playhead")
	os.MkdirAll(sub, 0o755)

	if note, err := CheckFresh(built, sub); err != nil || !strings.Contains(note, "cache/cache.go") {
		t.Errorf("fresh tree: %q, %v", note, err)
	}
	write("vfs/fs.go", built.Add(time.Minute))
	_, err := CheckFresh(built, sub)
	var stale *StaleError
	if !errors.As(err, &stale) || stale.Newest != filepath.Join("vfs", "fs.go") {
		t.Errorf("stale tree: %v", err)
	}
	if note, err := CheckFresh(built, t.TempDir()); err != nil || !strings.Contains(note, "not checked") {
		t.Errorf("no tree: %q, %v", note, err)
	}
}

// The daemon log directory (PLAYHEAD_BENCH_DAEMON_LOGS) is made when missing: a run
// asked to keep logs in a new directory used to keep none, silently.
func TestDaemonLogDirIsMade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs", "run1")
	f, err := createDaemonLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if filepath.Dir(f.Name()) != dir {
		t.Errorf("log at %s, want it in %s", f.Name(), dir)
	}
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := createDaemonLog(filepath.Join(blocked, "logs")); err == nil {
		t.Error("a log directory under a file: no error")
	}
}
