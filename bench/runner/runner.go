package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/playhead/playhead/bench/report"
	"github.com/playhead/playhead/bench/scenario"
	"github.com/playhead/playhead/linkemu"
	"github.com/playhead/playhead/origin"
)

// Config is one run of the benchmark.
type Config struct {
	// SUT is the system under test.
	SUT SUT
	// Cases are what to run, in order.
	Cases []scenario.Case
	// Link is the linkemu profile between the origin and the SUT ("far", "cloud", "lan",
	// "loopback").
	Link string
	// Trials is how many times each case runs, each on a fresh cache. Default 1.
	Trials int
	// TempDir holds each trial's cache and mountpoint, removed after the trial. Empty
	// means os.TempDir().
	TempDir string
	// Warm is how long to wait after a mount answers before measuring (see the package
	// doc). Zero means DefaultWarm; negative means no wait (tests).
	Warm time.Duration
	// DropCaches drops the page cache after each mount is ready; it needs root.
	DropCaches bool
	// PageCacheNote is the header's page-cache line when DropCaches is off (why not).
	PageCacheNote string
	// ProbeBytes is the size of the link probe's download. Zero means
	// linkemu.DefaultProbeBytes.
	ProbeBytes int64
	// Header is the caller's part of the report header (binary version, freshness,
	// quick); Run adds the link, its probe, the machine and the date.
	Header report.Header
	// Progress receives a line per trial. Nil means none.
	Progress io.Writer
}

// DefaultWarm is Config.Warm's default: the far link's round trip plus its handshake
// charge (0.4 s), the time the HTTP source's spare connection takes to come up, and a
// margin.
const DefaultWarm = 500 * time.Millisecond

// probePath is the origin file the link probe downloads.
const probePath = "probe.bin"

// diskMargin is the free disk a case needs beyond its files' size: the cache's metadata
// and the file system's own slack.
const diskMargin = 1.1

// Run runs every case Trials times and returns the report. Its error is for what stops
// the whole run: the origin or link cannot start, ctx ends, or a scenario read bytes that
// are not the origin's (then the report so far is returned with it). A failed trial is
// recorded in the report instead.
func Run(ctx context.Context, cfg Config) (*report.Report, error) {
	if cfg.Trials <= 0 {
		cfg.Trials = 1
	}
	if cfg.Warm == 0 {
		cfg.Warm = DefaultWarm
	}
	if cfg.ProbeBytes == 0 {
		cfg.ProbeBytes = linkemu.DefaultProbeBytes
	}
	if cfg.TempDir == "" {
		cfg.TempDir = os.TempDir()
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	linkOpts, err := linkemu.Profile(cfg.Link)
	if err != nil {
		return nil, err
	}
	files := map[string]origin.File{probePath: {Seed: 1, Size: cfg.ProbeBytes}}
	for _, c := range cfg.Cases {
		for p, f := range c.Files {
			if old, ok := files[p]; ok && old != f {
				return nil, fmt.Errorf("bench: two cases define %s differently", p)
			}
			files[p] = f
		}
	}
	org := origin.New(origin.Options{Files: files})
	orgURL, err := org.Start("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer org.Close()
	u, err := url.Parse(orgURL)
	if err != nil {
		return nil, err
	}
	link, err := linkemu.New(u.Host, linkOpts)
	if err != nil {
		return nil, err
	}
	addr, err := link.Start("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer link.Close()
	linkURL := "http://" + addr + "/"

	rep := &report.Report{Header: cfg.Header}
	h := &rep.Header
	h.Date = time.Now().UTC().Truncate(time.Second)
	h.Link, h.LinkOptions = cfg.Link, linkOpts.String()
	h.Trials = cfg.Trials
	h.Warm = max(cfg.Warm, 0).Seconds()
	mach := machine(runtime.NumCPU())
	h.CPUs, h.MemBytes, h.Kernel = mach.CPUs, mach.MemBytes, mach.Kernel
	h.Scenarios = nil
	for _, c := range cfg.Cases {
		if !slices.Contains(h.Scenarios, c.Scenario) {
			h.Scenarios = append(h.Scenarios, c.Scenario)
		}
	}
	h.PageCache = cfg.PageCacheNote
	if cfg.DropCaches {
		h.PageCache = "dropped (sync; echo 3 > /proc/sys/vm/drop_caches) after every mount is ready"
	}

	probe, err := linkemu.ProbeBytes(ctx, linkURL+probePath, cfg.ProbeBytes)
	if err != nil {
		return nil, fmt.Errorf("bench: the link does not answer: %w", err)
	}
	h.ProbeRTT, h.ProbeConnect, h.ProbeThroughput = probe.RTT.Seconds(), probe.Connect.Seconds(), probe.Throughput
	fmt.Fprintf(cfg.Progress, "link %s: %s\n", cfg.Link, probe)

	r := &run{cfg: cfg, org: org, linkURL: linkURL}
	var stopped error // what stopped the run, if anything
	for _, c := range cfg.Cases {
		cr := report.CaseResult{Scenario: c.Scenario, Name: c.Name}
		if stopped != nil {
			cr.Skipped = "not run: the run stopped before it: " + stopped.Error()
			rep.Cases = append(rep.Cases, cr)
			continue
		}
		if reason := r.cannotRun(c); reason != "" {
			cr.Skipped = reason
			fmt.Fprintf(cfg.Progress, "%s: cannot run: %s\n", c.Name, reason)
			rep.Cases = append(rep.Cases, cr)
			continue
		}
		for i := 1; i <= cfg.Trials; i++ {
			if err := ctx.Err(); err != nil {
				stopped = err
				break
			}
			t, err := r.trial(ctx, c, i)
			cr.Trials = append(cr.Trials, t)
			if t.Error != "" {
				fmt.Fprintf(cfg.Progress, "%s, trial %d/%d: FAILED after %.1fs: %s\n", c.Name, i, cfg.Trials, t.Elapsed, t.Error)
			} else {
				fmt.Fprintf(cfg.Progress, "%s, trial %d/%d: %.1fs\n", c.Name, i, cfg.Trials, t.Elapsed)
			}
			if err != nil {
				stopped = err
				break
			}
		}
		rep.Cases = append(rep.Cases, cr)
	}
	return rep, stopped
}

// run is the state shared by the trials of one Run.
type run struct {
	cfg     Config
	org     *origin.Server
	linkURL string
}

// cannotRun returns why case c cannot run here, or "".
func (r *run) cannotRun(c scenario.Case) string {
	var need int64
	for _, f := range c.Files {
		need += f.Size
	}
	need = int64(float64(need) * diskMargin)
	var st syscall.Statfs_t
	if err := syscall.Statfs(r.cfg.TempDir, &st); err != nil {
		return fmt.Sprintf("cannot check free disk at %s: %v", r.cfg.TempDir, err)
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free < need {
		return fmt.Sprintf("its cache needs %.0f MB of free disk at %s, which has %.0f MB (set TMPDIR elsewhere)",
			float64(need)/1e6, r.cfg.TempDir, float64(free)/1e6)
	}
	return ""
}

// trial runs case c once on a fresh cache and mountpoint. Its error stops the run: a
// data mismatch or the end of ctx; any other failure is only the trial's.
func (r *run) trial(ctx context.Context, c scenario.Case, n int) (report.Trial, error) {
	t := report.Trial{Trial: n}
	start := time.Now()
	dir, err := os.MkdirTemp(r.cfg.TempDir, "playhead-bench-")
	if err != nil {
		t.Error = err.Error()
		return t, nil
	}
	defer os.RemoveAll(dir)
	env := &trialEnv{run: r, req: MountRequest{
		OriginURL: r.linkURL,
		CacheDir:  filepath.Join(dir, "cache"),
		Dir:       filepath.Join(dir, "mnt"),
		ReadyFile: c.ReadyFile,
	}}
	figs, runErr := c.Run(ctx, env)
	stopErr := env.Unmount()
	stats := r.org.Stats()
	t.Elapsed = time.Since(start).Seconds()

	if runErr == nil && !env.mounted {
		runErr = errors.New("the scenario never mounted the system under test")
	}
	if runErr != nil {
		t.Error = errors.Join(runErr, stopErr).Error()
		if scenario.IsMismatch(runErr) {
			return t, runErr
		}
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
		return t, nil
	}
	figs[scenario.FigOriginBytes] = float64(stats.BytesWritten)
	figs[scenario.FigOriginRequests] = float64(stats.Requests)
	figs[scenario.FigNewConns] = float64(stats.NewConns)
	if env.rss > 0 {
		figs[scenario.FigPeakRSS] = float64(env.rss)
	}
	if env.cpuOK {
		figs[scenario.FigCPU] = env.cpu.Seconds()
	}
	scenario.Derive(figs)
	t.Figures = figs
	if err := errors.Join(stopErr, env.sampleErr); err != nil {
		t.Error = err.Error()
	}
	return t, nil
}

// trialEnv is the scenario.Env of one trial.
type trialEnv struct {
	run *run
	req MountRequest

	cur     Mounted // the live mount, nil when none
	mounted bool    // a mount succeeded in this trial

	// The last mount's daemon, sampled just before it was stopped.
	rss       int64
	cpu       time.Duration
	cpuOK     bool
	sampleErr error
}

var _ scenario.Env = (*trialEnv)(nil)

// Mount implements scenario.Env.
func (e *trialEnv) Mount(ctx context.Context) (fs.FS, error) {
	if e.cur != nil {
		return nil, errors.New("bench: Mount while mounted")
	}
	for _, d := range []string{e.req.CacheDir, e.req.Dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	m, err := e.run.cfg.SUT.Mount(ctx, e.req)
	if err != nil {
		return nil, err
	}
	e.cur, e.mounted = m, true
	if w := e.run.cfg.Warm; w > 0 {
		select {
		case <-time.After(w):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if e.run.cfg.DropCaches {
		if err := dropPageCache(); err != nil {
			return nil, err
		}
	}
	e.run.org.ResetStats()
	return m.FS(), nil
}

// Unmount implements scenario.Env: it samples the daemon and stops it.
func (e *trialEnv) Unmount() error {
	if e.cur == nil {
		return nil
	}
	m := e.cur
	e.cur = nil
	var errs []error
	rss, err := m.PeakRSS()
	errs = append(errs, err)
	cpu, err := m.CPU()
	errs = append(errs, err)
	e.rss, e.cpu, e.cpuOK = rss, cpu, err == nil
	e.sampleErr = errors.Join(errs...)
	if e.sampleErr != nil {
		e.sampleErr = fmt.Errorf("sample the daemon: %w", e.sampleErr)
	}
	return m.Unmount()
}
