package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/playhead/playhead/fusefs"
)

// Node is one daemon of a cluster.
type Node struct {
	Index      int
	Mountpoint string
	CacheDir   string // the current cache (Restart with a fresh cache changes it)
	LogPath    string // the daemon's output, every run of it appended

	host     string // loopback address
	port     int    // gossip port; the peer HTTP endpoint is port+1
	outsider bool   // a static-list node outside the gossip
	opts     Options
	args     []string // the peer flags
	restarts int      // fresh caches made so far

	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd.Wait returned
	waitErr error         // set before exited is closed
	logFrom int64         // where this run's lines start in LogPath
}

// GossipAddr is the node's memberlist address, which is also its name in the cluster.
func (n *Node) GossipAddr() string { return net.JoinHostPort(n.host, strconv.Itoa(n.port)) }

// HTTPAddr is the node's peer HTTP endpoint.
func (n *Node) HTTPAddr() string { return net.JoinHostPort(n.host, strconv.Itoa(n.port+1)) }

// Path is the source path p inside the node's mount.
func (n *Node) Path(p string) string { return filepath.Join(n.Mountpoint, filepath.FromSlash(p)) }

// Running reports whether the daemon has been started and has not exited.
func (n *Node) Running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// Pid is the daemon's process id (0 before the first start).
func (n *Node) Pid() int {
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

func (n *Node) makeDirs(root, name string) error {
	dir := filepath.Join(root, name)
	n.Mountpoint, n.CacheDir, n.LogPath = filepath.Join(dir, "mnt"), filepath.Join(dir, "cache"), filepath.Join(dir, "daemon.log")
	for _, d := range []string{n.Mountpoint, n.CacheDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	return nil
}

// start runs the daemon and waits until its mount answers.
func (n *Node) start(ctx context.Context) error {
	args := append([]string{"mount", n.opts.Source, n.Mountpoint, "--cache-dir", n.CacheDir, "--log-level", "info"}, n.args...)
	args = append(args, n.opts.Args...)
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer logf.Close() // the child has its own descriptor
	fmt.Fprintf(logf, "=== %s %s\n", n.opts.Exe, strings.Join(args, " "))
	if n.logFrom, err = logf.Seek(0, 2); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	cmd := exec.Command(n.opts.Exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // a Ctrl-C reaches the test, which stops the nodes in order
		Pdeathsig: syscall.SIGTERM, // a test that dies still gets its mounts unmounted
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cluster: start node %d: %w", n.Index, err)
	}
	n.cmd, n.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) {
		n.waitErr = cmd.Wait()
		close(exited)
	}(n.exited)
	if err := n.waitReady(ctx); err != nil {
		n.Stop()
		return fmt.Errorf("cluster: node %d: %w\n%s", n.Index, err, n.logSince())
	}
	return nil
}

// waitReady polls a stat of the ready file until it succeeds, the daemon exits or the
// timeout passes. The stat runs on its own goroutine: a hung mount would hang it.
func (n *Node) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.opts.ReadyTimeout)
	defer cancel()
	path := n.Path(n.opts.ReadyFile)
	var last error
	for {
		statDone := make(chan error, 1)
		go func() { _, err := os.Stat(path); statDone <- err }()
		select {
		case last = <-statDone:
			if last == nil {
				return nil
			}
		case <-n.exited:
			return fmt.Errorf("the daemon exited before its mount answered (%v)", n.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("the mount did not answer within %v (last stat: %v)", n.opts.ReadyTimeout, last)
		}
		select {
		case <-time.After(pollEvery):
		case <-n.exited:
			return fmt.Errorf("the daemon exited before its mount answered (%v)", n.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("the mount did not answer within %v (last stat: %v)", n.opts.ReadyTimeout, last)
		}
	}
}

// Timeouts of stopping a daemon.
const (
	// stopTimeout is how long a daemon may take to leave the cluster, unmount and exit
	// after SIGTERM (its leave alone may take a second) before it is killed.
	stopTimeout = 15 * time.Second
	// killWait is how long a SIGKILLed daemon gets to be reaped.
	killWait = 5 * time.Second
)

// kill sends SIGKILL, waits for the daemon to die and detaches its mount.
func (n *Node) kill() error {
	if !n.Running() {
		return fmt.Errorf("cluster: node %d is not running", n.Index)
	}
	n.cmd.Process.Kill()
	select {
	case <-n.exited:
	case <-time.After(killWait):
		return fmt.Errorf("cluster: node %d (pid %d) did not die after SIGKILL", n.Index, n.cmd.Process.Pid)
	}
	return detach(n.Mountpoint)
}

// Stop stops the daemon with SIGTERM (it leaves the cluster, unmounts and exits),
// kills it if it does not exit in time, and detaches a mount left behind. Stopping a
// node that is not running only makes sure nothing is mounted.
func (n *Node) Stop() error {
	var errs []error
	if n.Running() {
		n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.exited:
			if n.waitErr != nil {
				errs = append(errs, fmt.Errorf("node %d exited with %v after SIGTERM", n.Index, n.waitErr))
			}
		case <-time.After(stopTimeout):
			errs = append(errs, fmt.Errorf("node %d did not exit within %v of SIGTERM; killed", n.Index, stopTimeout))
			if err := n.kill(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := detach(n.Mountpoint); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("cluster: %w", errors.Join(errs...))
	}
	return nil
}

// logSince returns what the daemon's current run has logged.
func (n *Node) logSince() string {
	data, err := os.ReadFile(n.LogPath)
	if err != nil || int64(len(data)) < n.logFrom {
		return ""
	}
	return string(data[n.logFrom:])
}

// Log returns what the daemon's current (or last) run has logged.
func (n *Node) Log() string { return n.logSince() }

// memberLine matches memberlist's join and leave lines in the daemon's slog text log.
var memberLine = regexp.MustCompile(`msg="peer (joined|left)" node=(\S+)`)

// members returns the members the node's current run has logged, sorted: every node
// that joined and has not left since.
func (n *Node) members() ([]string, error) {
	set := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader([]byte(n.logSince())))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := memberLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		set[m[2]] = m[1] == "joined"
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cluster: node %d's log: %w", n.Index, err)
	}
	var out []string
	for name, in := range set {
		if in {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// freePortPair returns a port p on host with TCP and UDP p and TCP p+1 free: memberlist
// takes both protocols of p, the peer HTTP endpoint p+1.
func freePortPair(host string) (int, error) {
	const tries = 20
	for range tries {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return 0, fmt.Errorf("cluster: listen on %s: %w", host, err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		u, uerr := net.ListenPacket("udp", net.JoinHostPort(host, strconv.Itoa(p)))
		h, herr := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p+1)))
		l.Close()
		if uerr == nil {
			u.Close()
		}
		if herr == nil {
			h.Close()
		}
		if uerr == nil && herr == nil {
			return p, nil
		}
	}
	return 0, fmt.Errorf("cluster: no free port pair on %s after %d tries", host, tries)
}

// detach lazily unmounts dir if something is mounted there: fusermount3 for a FUSE
// mount, umount -l when that fails.
func detach(dir string) error {
	if !fusefs.IsMounted(dir) {
		return nil
	}
	var msgs []string
	for _, c := range [][]string{{"fusermount3", "-uz", dir}, {"umount", "-l", dir}} {
		out, err := exec.Command(c[0], c[1:]...).CombinedOutput()
		if !fusefs.IsMounted(dir) {
			return nil
		}
		msgs = append(msgs, fmt.Sprintf("%s: %v %s", c[0], err, strings.TrimSpace(string(out))))
	}
	return fmt.Errorf("cluster: cannot detach %s: %s", dir, strings.Join(msgs, "; "))
}
