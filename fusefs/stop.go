package fusefs

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Stopping a mount that is in use. A plain unmount fails (EBUSY) while a player holds a
// file open, and the daemon must not exit then: the mountpoint would be left stale
// ("transport endpoint is not connected") until someone detaches it by hand. So Stop
// escalates, each step bounded:
//
//  1. unmount, retried for unmountGrace: enough for a reader to close its file;
//  2. abort the FUSE connection through fusectl: the kernel fails every pending and
//     future request of the mount at once, so a reader blocked in a read is freed and
//     the kernel sends the daemon nothing more;
//  3. detach the mountpoint (MNT_DETACH): it leaves the namespace at once, and without
//     the abort the connection lives until the last open file is closed;
//  4. wait up to serveGrace for the server's loops to end.
//
// The caller closes the engine (vfs.FS) only after Stop: once the connection is
// aborted or unmounted, no request can reach it any more.

// Bounds of the steps above.
const (
	// unmountGrace is how long a busy mount is retried before it is aborted: long enough
	// for a player told to quit to close its files, short enough for a service manager's
	// stop timeout (systemd gives 90 s, a container runtime often 10 s).
	unmountGrace = 2 * time.Second
	// serveGrace bounds the wait for the server's loops after the kernel side is gone.
	// A handler blocked on the origin holds its loop until the I/O timeout; the engine's
	// Close then cancels it.
	serveGrace = 5 * time.Second
	// unmountRetry is the pause between unmount attempts.
	unmountRetry = 100 * time.Millisecond
)

// abortFUSE aborts a FUSE connection; tests replace it to run the fallback without
// fusectl.
var abortFUSE = abortFUSEConnection

// fusectlDir is where the kernel's FUSE control filesystem is mounted.
const fusectlDir = "/sys/fs/fuse/connections"

// StopResult says what Stop did, for the log and for tests.
type StopResult struct {
	Unmounted bool // a plain unmount succeeded
	Aborted   bool // the connection was aborted through fusectl
	Detached  bool // the mountpoint was detached lazily
	Served    bool // the server's loops ended within serveGrace
}

func (r StopResult) String() string {
	var steps []string
	if r.Unmounted {
		steps = append(steps, "unmounted")
	}
	if r.Aborted {
		steps = append(steps, "connection aborted")
	}
	if r.Detached {
		steps = append(steps, "detached")
	}
	if !r.Served {
		steps = append(steps, "server still busy")
	}
	if len(steps) == 0 {
		return "nothing done"
	}
	return strings.Join(steps, ", ")
}

// Stop unmounts server from dir as described above, logs what it did, and returns an
// error only when dir may still be mounted. It never blocks for more than about
// unmountGrace + serveGrace plus a few system calls, whatever the kernel or a reader
// does.
func Stop(server *fuse.Server, dir string, log *slog.Logger) (StopResult, error) {
	if log == nil {
		log = slog.Default()
	}
	var res StopResult
	// The device is looked up before anything else: afterwards the mount is gone from
	// mountinfo. Reading mountinfo never asks the daemon, unlike stat of dir.
	dev, devErr := mountDevice(dir)

	unmounted := make(chan error, 1)
	go func() {
		var err error
		for deadline := time.Now().Add(unmountGrace); ; time.Sleep(unmountRetry) {
			if err = syscall.Unmount(dir, 0); err == nil || time.Now().After(deadline) {
				break
			}
			if errors.Is(err, syscall.EPERM) {
				err = fusermount(dir, false)
				if err == nil {
					break
				}
			}
		}
		unmounted <- err
	}()
	var uerr error
	select {
	case uerr = <-unmounted:
	case <-time.After(unmountGrace + time.Second):
		uerr = errors.New("unmount did not return")
	}
	if uerr == nil {
		res.Unmounted = true
	} else {
		log.Warn("mount busy: aborting its FUSE connection", "mountpoint", dir, "err", uerr)
		if devErr == nil {
			if err := abortFUSE(dev); err != nil {
				log.Warn("cannot abort the FUSE connection", "mountpoint", dir, "err", err)
			} else {
				res.Aborted = true
			}
		} else {
			log.Warn("cannot find the mount's FUSE connection", "mountpoint", dir, "err", devErr)
		}
		err := syscall.Unmount(dir, syscall.MNT_DETACH)
		if err != nil {
			err = fusermount(dir, true)
		}
		res.Detached = err == nil
		if err != nil && stillMounted(dir) {
			log.Error("cannot detach the mountpoint", "mountpoint", dir, "err", err)
			res.Served = waitServer(server, serveGrace)
			return res, fmt.Errorf("unmount %s: %w", dir, err)
		}
	}
	res.Served = waitServer(server, serveGrace)
	log.Info("stopped mount", "mountpoint", dir, "steps", res.String())
	return res, nil
}

// waitServer waits up to d for server's loops to end.
func waitServer(server *fuse.Server, d time.Duration) bool {
	done := make(chan struct{})
	go func() { server.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// fusermount runs fusermount3 -u (-z for lazy): how a user other than root unmounts.
func fusermount(dir string, lazy bool) error {
	flag := "-u"
	if lazy {
		flag = "-uz"
	}
	var err error
	for _, prog := range []string{"fusermount3", "fusermount"} {
		if err = exec.Command(prog, flag, dir).Run(); err == nil {
			return nil
		}
	}
	return err
}

// mountDevice returns the device minor number of the mount at dir from
// /proc/self/mountinfo: its FUSE connection's name in fusectl.
func mountDevice(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	dev := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || unescapeMountinfo(fields[4]) != abs {
			continue
		}
		_, minor, ok := strings.Cut(fields[2], ":")
		if ok {
			dev = minor // the last mount on dir is the visible one
		}
	}
	if dev == "" {
		return "", fmt.Errorf("%s is not in /proc/self/mountinfo", abs)
	}
	return dev, sc.Err()
}

// stillMounted reports whether dir is a mountpoint in mountinfo.
func stillMounted(dir string) bool {
	_, err := mountDevice(dir)
	return err == nil
}

// IsMounted reports whether dir is a mountpoint in this process's mount namespace, by
// /proc/self/mountinfo: a stat of a dead FUSE mount would fail or hang.
func IsMounted(dir string) bool { return stillMounted(dir) }

// unescapeMountinfo undoes the octal escapes (\040 for space) of a mountinfo path.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			var v byte
			ok := true
			for _, c := range []byte(s[i+1 : i+4]) {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + c - '0'
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// abortFUSEConnection aborts the FUSE connection dev through fusectl, mounting fusectl
// first when it is not (root only).
func abortFUSEConnection(dev string) error {
	abort := filepath.Join(fusectlDir, dev, "abort")
	if _, err := os.Stat(abort); err != nil {
		if err := syscall.Mount("fusectl", fusectlDir, "fusectl", 0, ""); err != nil && !errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("fusectl is not mounted and cannot be: %w", err)
		}
	}
	return os.WriteFile(abort, []byte("1"), 0)
}
