package kernlink

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// nsPrefix starts the name of every namespace kernlink creates: nsPrefix + pid + "-" + n.
// Only names of this form are ever deleted, and only when their process is gone.
const nsPrefix = "phbench-"

// run runs a command (ip, tc) and returns its error with its output.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// output runs a command and returns its standard output.
func output(name string, args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(out), nil
}

// checkCan reports what kernlink needs and this process lacks: root, the ip and tc
// commands, /dev/net/tun.
func checkCan() error {
	if os.Geteuid() != 0 {
		return errors.New("not running as root")
	}
	for _, c := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(c); err != nil {
			return fmt.Errorf("%s not found (iproute2): %w", c, err)
		}
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("no TUN device: %w", err)
	}
	return nil
}

// namespaces lists the network namespaces `ip netns` knows.
func namespaces() ([]string, error) {
	out, err := output("ip", "netns", "list")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// stalePID returns the process id in a kernlink namespace's name, and false for any
// other name.
func stalePID(ns string) (int, bool) {
	rest, ok := strings.CutPrefix(ns, nsPrefix)
	if !ok {
		return 0, false
	}
	pidStr, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidStr)
	return pid, err == nil && pid > 0
}

// deleteStale deletes the kernlink namespaces whose process no longer exists: a run that
// was killed before its Close. Namespaces of live processes (another bench) are left.
func deleteStale() error {
	names, err := namespaces()
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range names {
		pid, ok := stalePID(ns)
		if !ok || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		if err := run("ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// usedSubnets returns the third octets of the 10.79.X.0/24 addresses on the host.
func usedSubnets() (map[int]bool, error) {
	out, err := output("ip", "-4", "-o", "addr", "show")
	if err != nil {
		return nil, err
	}
	used := map[int]bool{}
	for _, f := range strings.Fields(out) {
		if rest, ok := strings.CutPrefix(f, subnetPrefix); ok {
			if x, _, ok := strings.Cut(rest, "."); ok {
				if n, err := strconv.Atoi(x); err == nil {
					used[n] = true
				}
			}
		}
	}
	return used, nil
}

// subnetPrefix is the /16 kernlink takes its point-to-point pairs from: 10.79.X.1 is the
// host's end, 10.79.X.2 the namespace's.
const subnetPrefix = "10.79."

// tbfArgs are tc's arguments for the tbf that shapes dev to rate bytes/s.
func tbfArgs(dev string, rate int64) []string {
	return []string{"qdisc", "replace", "dev", dev, "root", "tbf",
		"rate", strconv.FormatInt(rate*8, 10) + "bit",
		"burst", strconv.FormatInt(tbfBurst(rate), 10),
		"latency", tbfLatency}
}

// tbfLatency is how long a packet may wait in tbf's queue before it is dropped: the
// link's buffer, 50 ms at its rate (1.5 MB at 30 MB/s), a router's usual depth.
const tbfLatency = "50ms"

// tbfBurst is tbf's bucket for rate bytes/s: 64 KiB, or 2 ms of the rate when that is
// more. The kernel refills the bucket each tick, and a bucket smaller than a tick's worth
// of the rate would cap the link below it.
func tbfBurst(rate int64) int64 {
	return max(64<<10, rate/500)
}
