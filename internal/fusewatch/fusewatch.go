// Package fusewatch keeps a test binary that mounts FUSE file systems in its own process
// from hanging forever.
//
// A process that serves a FUSE mount and also reads it can never exit on its own once
// it is stuck: exiting closes its files, closing a file on its own mount sends the
// kernel's FLUSH to a server that is already gone, and the exit waits for the answer
// for ever (the go test timeout's panic ends in exactly this state). Main runs the
// tests with a watchdog that fires before the test binary's -test.timeout: it prints
// every goroutine's stack, aborts the FUSE connections of the playhead mounts under
// the temporary directory (the kernel then fails every request on them at once) and
// exits with a failure, so a hang costs minutes and leaves its cause in the log.
package fusewatch

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// Main runs m with the watchdog and exits with its result.
func Main(m *testing.M) {
	flag.Parse()
	budget := 10 * time.Minute
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 0 {
			budget = d - min(d/5, time.Minute) // fire before the test binary's own panic
		}
	}
	timer := time.AfterFunc(budget, func() { fire(budget) })
	code := m.Run()
	timer.Stop()
	os.Exit(code)
}

func fire(budget time.Duration) {
	fmt.Fprintf(os.Stderr, "fusewatch: tests still running after %v; goroutines:\n", budget)
	pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
	n, err := AbortMounts(os.TempDir())
	fmt.Fprintf(os.Stderr, "fusewatch: aborted %d FUSE connections (err %v); exiting\n", n, err)
	os.Exit(3)
}

// AbortMounts aborts the FUSE connection of every playhead mount whose mountpoint lies
// under dir, through fusectl (/sys/fs/fuse/connections/<device minor>/abort). It reads
// the mount table rather than stat'ing the mountpoints, which would hang on a dead
// server.
func AbortMounts(dir string) (int, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	dir = filepath.Clean(dir) + "/"
	n := 0
	var errs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options ... - fstype source superopts
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, s := range fields {
			if s == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+3 || len(fields) < 5 {
			continue
		}
		fstype, source, mnt := fields[sep+1], fields[sep+2], fields[4]
		if !strings.HasPrefix(fstype, "fuse") || !strings.HasPrefix(source, "playhead:") ||
			!strings.HasPrefix(mnt+"/", dir) {
			continue
		}
		_, minor, ok := strings.Cut(fields[2], ":")
		if !ok {
			continue
		}
		if err := os.WriteFile(filepath.Join("/sys/fs/fuse/connections", minor, "abort"), []byte("1"), 0); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		n++
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return n, sc.Err()
}
