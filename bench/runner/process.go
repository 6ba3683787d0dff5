package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcessSUT mounts by running `EXE mount URL DIR --cache-dir C --log-level warn ARGS...`
// as a child process: playhead benchmarks the binary it was started from. With Argv it
// runs another tool's mount the same way (rclone).
type ProcessSUT struct {
	// Exe is the playhead binary (os.Executable() for the running one).
	Exe string
	// Args are extra flags for `mount` (for example --read-ahead 0).
	Args []string
	// Argv, if set, builds the whole command line after Exe instead (another tool's
	// mount: rclone); Args are then appended to it.
	Argv func(req MountRequest) []string
	// Env, if set, returns variables the daemon gets on top of the runner's environment
	// (rclone's remote for a bucket). Without it, playhead's mount of a bucket
	// (req.Bucket) gets the bucket's credentials (Bucket.PlayheadEnv).
	Env func(req MountRequest) []string
	// TermExitCodes are exit codes that mean a clean stop after SIGTERM, besides 0
	// (rclone unmounts and then exits with 128+SIGTERM, 143).
	TermExitCodes []int
	// ReadyTimeout is how long a mount may take to answer. Default 30 s: the probe and
	// listing take a few round trips, and a slow link is what is being measured.
	ReadyTimeout time.Duration
	// StopTimeout is how long the daemon may take to exit after SIGTERM before it is
	// killed. Default 10 s.
	StopTimeout time.Duration
}

// Defaults of ProcessSUT.
const (
	DefaultReadyTimeout = 30 * time.Second
	DefaultStopTimeout  = 10 * time.Second
	// readyPoll is how often a mount is asked whether it answers: fine enough not to
	// delay a trial noticeably, coarse enough not to load the daemon.
	readyPoll = 20 * time.Millisecond
	// stderrTail is how much of the daemon's output errors quote.
	stderrTail = 8 << 10
	// daemonLogEnv names a directory where every daemon's whole output is kept.
	daemonLogEnv = "PLAYHEAD_BENCH_DAEMON_LOGS"
	// originLogEnv names a file the built-in origin appends a line per request to
	// (origin.Options.RequestLog): range, status, bytes written.
	originLogEnv = "PLAYHEAD_BENCH_ORIGIN_LOG"
	// killWait is how long a SIGKILLed daemon gets to be reaped.
	killWait = 5 * time.Second
)

// Mount implements SUT.
func (p *ProcessSUT) Mount(ctx context.Context, req MountRequest) (Mounted, error) {
	readyTimeout, stopTimeout := p.ReadyTimeout, p.StopTimeout
	if readyTimeout == 0 {
		readyTimeout = DefaultReadyTimeout
	}
	if stopTimeout == 0 {
		stopTimeout = DefaultStopTimeout
	}
	args := []string{"mount", req.OriginURL, req.Dir, "--cache-dir", req.CacheDir, "--log-level", "warn"}
	var env []string
	if req.Bucket != nil {
		args, env = req.Bucket.PlayheadArgs(req), req.Bucket.PlayheadEnv()
	}
	if p.Argv != nil {
		args, env = p.Argv(req), nil
	}
	if p.Env != nil {
		env = p.Env(req)
	}
	args = append(args, p.Args...)
	cmd := exec.Command(p.Exe, args...)
	if req.Bucket != nil {
		// A developer's own AWS_ or RCLONE_CONFIG_ settings (a profile, a session token,
		// a remote of the same name) must not change what is measured.
		cmd.Env = withEnv([]string{"AWS_", "RCLONE_CONFIG_"}, env)
	} else if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out := &tailBuffer{max: stderrTail}
	cmd.Stdout, cmd.Stderr = out, out
	var logFile *os.File
	if dir := os.Getenv(daemonLogEnv); dir != "" {
		// Keep the daemon's whole output for debugging a run (with --mount-arg=--log-level=debug).
		// The directory is made if missing; a log that cannot be kept fails the mount,
		// since whoever set the variable is about to read logs that would not be there.
		lf, err := createDaemonLog(dir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", daemonLogEnv, err)
		}
		logFile = lf
		fmt.Fprintf(lf, "%s\n", strings.Join(append([]string{p.Exe}, args...), " "))
		cmd.Stdout, cmd.Stderr = io.MultiWriter(out, lf), io.MultiWriter(out, lf)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group: a Ctrl-C in the terminal reaches the runner, which then
		// stops the daemon in order, instead of racing it.
		Setpgid: true,
		// If the runner dies without stopping it, the daemon unmounts on SIGTERM.
		Pdeathsig: syscall.SIGTERM,
	}
	if err := cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return nil, fmt.Errorf("start %s: %w", p.Exe, err)
	}
	m := &process{cmd: cmd, dir: req.Dir, out: out, exited: make(chan struct{}), stopTimeout: stopTimeout,
		termExitCodes: p.TermExitCodes}
	go func() {
		m.waitErr = cmd.Wait()
		if logFile != nil {
			logFile.Close()
		}
		close(m.exited)
	}()
	if err := m.waitReady(ctx, filepath.Join(req.Dir, filepath.FromSlash(req.ReadyFile)), readyTimeout); err != nil {
		m.Unmount()
		what := req.OriginURL
		if req.Bucket != nil {
			what = req.Bucket.URL() + " at " + req.OriginURL
		}
		return nil, fmt.Errorf("mount %s at %s: %w%s", what, req.Dir, err, out.quote())
	}
	return m, nil
}

// process is a mount run by a child process.
type process struct {
	cmd           *exec.Cmd
	dir           string
	out           *tailBuffer
	stopTimeout   time.Duration
	termExitCodes []int         // clean exits after SIGTERM besides 0
	exited        chan struct{} // closed when cmd.Wait returned
	waitErr       error         // set before exited is closed

	once     sync.Once
	unmountE error
}

func (m *process) FS() fs.FS                   { return os.DirFS(m.dir) }
func (m *process) Dir() string                 { return m.dir }
func (m *process) PeakRSS() (int64, error)     { return peakRSS(m.cmd.Process.Pid) }
func (m *process) CPU() (time.Duration, error) { return cpuTime(m.cmd.Process.Pid) }

// waitReady polls a stat of path until it succeeds, the daemon exits, or the timeout.
// The stat runs on its own goroutine: a daemon that hangs would hang it forever.
func (m *process) waitReady(ctx context.Context, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	var last error
	for {
		statDone := make(chan error, 1)
		go func() { _, err := os.Stat(path); statDone <- err }()
		select {
		case err := <-statDone:
			if err == nil {
				return nil
			}
			last = err
		case <-m.exited:
			return fmt.Errorf("the daemon exited before the mount answered (%v)", m.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v (last stat: %v)", timeout, last)
		}
		select {
		case <-tick.C:
		case <-m.exited:
			return fmt.Errorf("the daemon exited before the mount answered (%v)", m.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v (last stat: %v)", timeout, last)
		}
	}
}

// Unmount stops the daemon with SIGTERM (it unmounts and exits), kills it if it does
// not exit in time, and detaches the mount if one is left. It is safe to call twice.
func (m *process) Unmount() error {
	m.once.Do(func() { m.unmountE = m.stop() })
	return m.unmountE
}

func (m *process) stop() error {
	var errs []error
	select {
	case <-m.exited:
		errs = append(errs, fmt.Errorf("the daemon had already exited (%v)", m.waitErr))
	default:
		m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.exited:
			if m.waitErr != nil && !slices.Contains(m.termExitCodes, m.cmd.ProcessState.ExitCode()) {
				errs = append(errs, fmt.Errorf("the daemon exited with %v after SIGTERM", m.waitErr))
			}
		case <-time.After(m.stopTimeout):
			errs = append(errs, fmt.Errorf("the daemon did not exit within %v of SIGTERM; killed", m.stopTimeout))
			m.cmd.Process.Kill()
			select {
			case <-m.exited:
			case <-time.After(killWait):
				errs = append(errs, fmt.Errorf("the daemon (pid %d) did not die after SIGKILL", m.cmd.Process.Pid))
			}
		}
	}
	if isMounted(m.dir) {
		if err := detach(m.dir); err != nil {
			errs = append(errs, err)
		} else {
			errs = append(errs, fmt.Errorf("the mount was left behind and had to be detached"))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("unmount %s: %w%s", m.dir, errors.Join(errs...), m.out.quote())
	}
	return nil
}

// detach lazily unmounts dir: fusermount3 for mounts a user made, umount for root's.
func detach(dir string) error {
	var msgs []string
	for _, c := range [][]string{{"fusermount3", "-uz", dir}, {"fusermount", "-uz", dir}, {"umount", "-l", dir}} {
		out, err := exec.Command(c[0], c[1:]...).CombinedOutput()
		if err == nil && !isMounted(dir) {
			return nil
		}
		msgs = append(msgs, fmt.Sprintf("%s: %v %s", c[0], err, strings.TrimSpace(string(out))))
	}
	return fmt.Errorf("cannot detach %s: %s", dir, strings.Join(msgs, "; "))
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// quote returns the output for an error message: empty, or a newline and the text.
func (t *tailBuffer) quote() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return " (the daemon printed nothing)"
	}
	return "\ndaemon output:\n" + s
}

// String returns what the daemon printed.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// createDaemonLog creates a new daemon log file in dir, making dir first if needed.
func createDaemonLog(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return os.CreateTemp(dir, "daemon-*.log")
}
