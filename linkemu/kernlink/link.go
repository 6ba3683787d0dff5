package kernlink

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Link is a running kernel-shaped link: a namespace, its two TUN devices, and the delay
// lines between them.
type Link struct {
	opts   Options
	ns     string // network namespace, under /run/netns
	hostIf string // TUN in this process's namespace
	nsIf   string // TUN in ns
	subnet int    // X in 10.79.X.1 (host) and 10.79.X.2 (ns)

	hostTun, nsTun *os.File
	up, down       *delayLine // host to ns, ns to host

	wg      sync.WaitGroup
	errMu   sync.Mutex
	loopErr error // the first delay line that failed, for Close
	closed  atomic.Bool
}

// starts numbers the links of this process, so each gets its own names.
var starts atomic.Int64

// Start builds the link and starts its delay lines. Its errors say what is missing
// (root, tc tbf, TUN); it removes whatever it built before failing.
func Start(opts Options) (l *Link, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := checkCan(); err != nil {
		return nil, fmt.Errorf("kernlink: %w", err)
	}
	if err := deleteStale(); err != nil {
		return nil, fmt.Errorf("kernlink: delete a stale namespace: %w", err)
	}
	used, err := usedSubnets()
	if err != nil {
		return nil, err
	}
	pid, n := os.Getpid(), starts.Add(1)
	l = &Link{opts: opts, ns: fmt.Sprintf("%s%d-%d", nsPrefix, pid, n),
		hostIf: fmt.Sprintf("phk%dh%d", pid, n%1000), nsIf: fmt.Sprintf("phk%dn%d", pid, n%1000), subnet: -1}
	for i := range 256 {
		if x := (pid + int(n) + i) % 256; !used[x] {
			l.subnet = x
			break
		}
	}
	if l.subnet < 0 {
		return nil, fmt.Errorf("kernlink: every %s0.0/16 subnet is in use", subnetPrefix)
	}
	defer func() {
		if err != nil {
			l.Close()
			l = nil
		}
	}()
	if err := l.build(); err != nil {
		return l, fmt.Errorf("kernlink: %w", err)
	}
	l.up = newDelayLine(opts.RTT/2, opts.mtu())
	l.down = newDelayLine(opts.RTT/2, opts.mtu())
	l.loop(func() error { return l.up.feed(l.hostTun) })
	l.loop(func() error { return l.up.drain(l.nsTun) })
	l.loop(func() error { return l.down.feed(l.nsTun) })
	l.loop(func() error { return l.down.drain(l.hostTun) })
	return l, nil
}

// loop runs f on its own goroutine until Close, keeping its first error.
func (l *Link) loop(f func() error) {
	l.wg.Go(func() {
		if err := f(); err != nil && !l.closed.Load() {
			l.errMu.Lock()
			l.loopErr = firstErr(l.loopErr, err)
			l.errMu.Unlock()
		}
	})
}

func firstErr(old, err error) error {
	if old != nil {
		return old
	}
	return err
}

// build creates the namespace and the devices, addresses them, shapes them with tbf and
// sets the namespace's TCP like the host's.
func (l *Link) build() error {
	mtu := strconv.Itoa(l.opts.mtu())
	hostAddr, nsAddr := l.ClientIP(), l.ServerIP()
	if err := run("ip", "netns", "add", l.ns); err != nil {
		return err
	}
	var err error
	if l.hostTun, err = openTun(l.hostIf); err != nil {
		return err
	}
	if l.nsTun, err = openTun(l.nsIf); err != nil {
		return err
	}
	// The namespace's end is created here and moved there: its file stays attached.
	steps := [][]string{
		{"ip", "link", "set", l.nsIf, "netns", l.ns},
		{"ip", "-n", l.ns, "link", "set", "lo", "up"},
		{"ip", "addr", "add", hostAddr, "peer", nsAddr, "dev", l.hostIf},
		{"ip", "link", "set", l.hostIf, "mtu", mtu, "txqueuelen", txQueueLen, "up"},
		{"ip", "-n", l.ns, "addr", "add", nsAddr, "peer", hostAddr, "dev", l.nsIf},
		{"ip", "-n", l.ns, "link", "set", l.nsIf, "mtu", mtu, "txqueuelen", txQueueLen, "up"},
		append([]string{"tc"}, tbfArgs(l.hostIf, l.opts.Bandwidth)...),
		append([]string{"tc", "-n", l.ns}, tbfArgs(l.nsIf, l.opts.Bandwidth)...),
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return l.copyTCPSettings()
}

// txQueueLen is each TUN's queue between tbf and this process's reader, in packets: a
// TUN drops what its reader has not taken when the queue is full, and the default 500
// (17 ms at 30 MB/s) is shorter than a busy 2-core machine may leave a goroutine
// waiting; 4096 is 200 ms there, so drops are tbf's, not the reader's.
const txQueueLen = "4096"

// tcpSettings are the host's TCP settings the namespace copies: a new namespace starts
// from the kernel's defaults (a 4 MB send buffer, whatever the host was tuned to), and
// the origin's side of the link should send as this machine would.
var tcpSettings = []string{"net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}

func (l *Link) copyTCPSettings() error {
	for _, key := range tcpSettings {
		v, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(key, ".", "/"))
		if err != nil {
			return err
		}
		val := strings.Join(strings.Fields(string(v)), " ")
		if err := run("ip", "netns", "exec", l.ns, "sysctl", "-q", "-w", key+"="+val); err != nil {
			return err
		}
	}
	return nil
}

// ClientIP is the host's end of the link, ServerIP the namespace's: servers listen on
// ServerIP (through Listen) and clients dial it.
func (l *Link) ClientIP() string { return fmt.Sprintf("%s%d.1", subnetPrefix, l.subnet) }

// ServerIP is the namespace's end of the link.
func (l *Link) ServerIP() string { return fmt.Sprintf("%s%d.2", subnetPrefix, l.subnet) }

// Namespace returns the network namespace's name (for `ip netns exec`).
func (l *Link) Namespace() string { return l.ns }

// Options returns the link's options.
func (l *Link) Options() Options { return l.opts }

// Listen listens on ServerIP:port (0: any free port) inside the namespace. The socket is
// created on a thread that joined the namespace and left it again; if leaving fails, the
// thread stays locked to its goroutine and the runtime ends it with the goroutine.
func (l *Link) Listen(port int) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		ln, err := l.listenInNS(net.JoinHostPort(l.ServerIP(), strconv.Itoa(port)))
		if !errors.Is(err, errStuck) {
			runtime.UnlockOSThread()
		}
		ch <- result{ln, err}
	}()
	r := <-ch
	return r.ln, r.err
}

// errStuck is listenInNS's error when its thread could not return to its namespace.
var errStuck = errors.New("kernlink: could not leave the namespace")

// listenInNS must run on a locked thread.
func (l *Link) listenInNS(addr string) (net.Listener, error) {
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, err
	}
	defer self.Close()
	target, err := os.Open("/run/netns/" + l.ns)
	if err != nil {
		return nil, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("kernlink: join %s: %w", l.ns, err)
	}
	ln, lerr := net.Listen("tcp", addr)
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, fmt.Errorf("%w: %w", errStuck, err)
	}
	if lerr != nil {
		return nil, fmt.Errorf("kernlink: listen in %s: %w", l.ns, lerr)
	}
	return ln, nil
}

// ServerTxBytes is what the namespace's end has sent onto the link since Start: IP
// packets, headers and retransmissions included, as the kernel counts the device's
// transmitted bytes (after tbf's drops).
func (l *Link) ServerTxBytes() (int64, error) {
	out, err := output("ip", "netns", "exec", l.ns, "cat", "/sys/class/net/"+l.nsIf+"/statistics/tx_bytes")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(out), 10, 64)
}

// Close stops the delay lines, closes the devices and deletes the namespace. It returns
// the first error of the delay lines or of the teardown. Safe to call twice.
func (l *Link) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, f := range []*os.File{l.hostTun, l.nsTun} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	l.wg.Wait()
	l.errMu.Lock()
	errs = append(errs, l.loopErr)
	l.errMu.Unlock()
	if err := run("ip", "netns", "del", l.ns); err != nil && !strings.Contains(err.Error(), "No such file") {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
