package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
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
	// Systems are what to measure, in column order. Empty means SUT alone, as
	// "playhead".
	Systems []System
	// SUT is the system under test when Systems is empty.
	SUT SUT
	// Cases are what to run, in order.
	Cases []scenario.Case
	// Link is the profile of the link between the origin and the SUT: a linkemu one
	// ("far", "cloud", "lan", "loopback") or a kernel-shaped one (kernlink: "far-shared",
	// "cloud-kernel"; kernel.go).
	Link string
	// Origin is the server behind the link: OriginBuiltin (empty), OriginNginx or
	// OriginS3.
	Origin string
	// Nginx is the nginx binary for OriginNginx. Empty means "nginx" from PATH.
	Nginx string
	// MinIO is the MinIO server binary for OriginS3. Empty means FindMinIO's search.
	MinIO string
	// Trials is how many times each case runs, each on a fresh cache. Default 1.
	Trials int
	// TempDir holds each trial's cache and mountpoint, removed after the trial, and the
	// origin's files when they are written to disk. Empty means os.TempDir().
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
	// quick); Run adds the link, its probe, the machine, the origin, the systems and the
	// date.
	Header report.Header
	// Progress receives a line per trial. Nil means none.
	Progress io.Writer
}

// Origins of Config.Origin.
const (
	OriginBuiltin = "builtin"
	OriginNginx   = "nginx"
	// OriginS3 is MinIO serving the files from a bucket, read through the S3 API (s3.go).
	OriginS3 = "s3"
)

// DefaultWarm is Config.Warm's default: the far link's round trip plus its handshake
// charge (0.4 s), the time the HTTP source's spare connection takes to come up, and a
// margin.
const DefaultWarm = 500 * time.Millisecond

// probePath is the origin file the link probe downloads.
const probePath = "probe.bin"

// diskMargin is the free disk a case needs beyond its files' size: the cache's metadata
// and the file system's own slack.
const diskMargin = 1.1

// Run runs every case Trials times on every system and returns the report. The trials
// of one case alternate between the systems (trial 1 of each, then trial 2 of each), so
// a slow spell of the machine falls on all of them. Its error is for what stops the
// whole run: the origin or link cannot start, ctx ends, or a scenario read bytes that
// are not the origin's (then the report so far is returned with it). A failed trial is
// recorded in the report instead.
func Run(ctx context.Context, cfg Config) (*report.Report, error) {
	cfg = cfg.withDefaults()
	if err := CheckLink(cfg.Link); err != nil {
		return nil, err
	}
	files, err := originFiles(cfg)
	if err != nil {
		return nil, err
	}
	filesDir, err := writeOriginFiles(ctx, cfg, files)
	if filesDir != "" {
		defer os.RemoveAll(filesDir)
	}
	if err != nil {
		return nil, err
	}
	sv, err := serve(ctx, cfg, files, filesDir)
	if sv != nil {
		defer sv.close()
	}
	if err != nil {
		return nil, err
	}

	rep := &report.Report{Header: header(cfg, sv.ls.desc, sv.desc)}
	h := &rep.Header
	probe, err := linkemu.ProbeBytes(ctx, sv.probeURL, cfg.ProbeBytes)
	if err != nil {
		return nil, fmt.Errorf("bench: the link does not answer: %w", err)
	}
	h.ProbeRTT, h.ProbeConnect, h.ProbeThroughput = probe.RTT.Seconds(), probe.Connect.Seconds(), probe.Throughput
	fmt.Fprintf(cfg.Progress, "link %s: %s\n", cfg.Link, probe)

	r := &run{cfg: cfg, org: sv.org, linkURL: sv.ls.url, filesDir: filesDir, bucket: sv.bucket}
	var stopped error // what stopped the run, if anything
	for _, c := range cfg.Cases {
		rep.Cases = append(rep.Cases, r.runCase(ctx, c, &stopped)...)
	}
	return rep, stopped
}

// originFiles gathers the files every case needs, and the link probe's, into one map;
// two cases may share a file only if they define it alike.
func originFiles(cfg Config) (map[string]origin.File, error) {
	files := map[string]origin.File{probePath: {Seed: 1, Size: cfg.ProbeBytes}}
	for _, c := range cfg.Cases {
		for p, f := range c.Files {
			if old, ok := files[p]; ok && old != f {
				return nil, fmt.Errorf("bench: two cases define %s differently", p)
			}
			files[p] = f
		}
	}
	return files, nil
}

// writeOriginFiles writes the origin's files to a new directory when nginx serves them
// or a ceiling reads them from disk, and returns it ("" when none is needed). The
// caller removes a returned directory, even with an error.
func writeOriginFiles(ctx context.Context, cfg Config, files map[string]origin.File) (string, error) {
	needFiles := cfg.Origin == OriginNginx
	for _, s := range cfg.Systems {
		needFiles = needFiles || (s.NeedsFiles && s.Info.Unavailable == "")
	}
	if !needFiles {
		return "", nil
	}
	dir, err := os.MkdirTemp(cfg.TempDir, "playhead-bench-origin-")
	if err != nil {
		return "", err
	}
	fmt.Fprintf(cfg.Progress, "writing the origin's files to %s\n", dir)
	return dir, writeFiles(ctx, dir, files)
}

// serving is the origin behind the link, as the trials and the probe reach it.
type serving struct {
	org      originServer
	ls       *linkSetup
	desc     string  // the origin, for the header
	probeURL string  // what the link probe reads
	bucket   *Bucket // the bucket behind the link (OriginS3), or nil
	closers  []func() error
}

// close stops the link, then the origin.
func (sv *serving) close() {
	for i := len(sv.closers) - 1; i >= 0; i-- {
		sv.closers[i]()
	}
}

// serve starts the origin and the link in front of it. A non-nil serving is returned
// even with an error, for the caller to close what did start.
func serve(ctx context.Context, cfg Config, files map[string]origin.File, filesDir string) (*serving, error) {
	org, orgURL, orgDesc, minio, err := startOrigin(ctx, cfg, files, filesDir)
	if err != nil {
		return nil, err
	}
	sv := &serving{org: org, desc: orgDesc, closers: []func() error{org.Close}}
	u, err := url.Parse(orgURL)
	if err != nil {
		return sv, err
	}
	if cfg.Link == linkemu.ProfileLoopback && (cfg.Origin == "" || cfg.Origin == OriginBuiltin) {
		sv.ls = directLink(u.Host)
	} else if sv.ls, err = startLink(cfg.Link, u.Host); err != nil {
		return sv, err
	}
	sv.closers = append(sv.closers, sv.ls.close)
	if n, ok := org.(*nginxOrigin); ok {
		n.link = sv.ls.link // nginx's log has no TCP accepts; the link counts them
	}
	if sv.ls.kernel != nil {
		sv.org = &wireCounted{originServer: org, kl: sv.ls.kernel}
	}
	sv.probeURL = sv.ls.url + probePath
	if minio != nil {
		minio.setLink(sv.ls.link, sv.ls.url)
		sv.desc, sv.bucket = minio.describe(), minio.bucket
		if sv.probeURL, err = sv.bucket.ObjectURL(ctx, http.MethodGet, probePath); err != nil {
			return sv, err
		}
	}
	return sv, nil
}

// header is the report's header before the link probe: the run's settings, the machine
// and the systems.
func header(cfg Config, linkDesc, orgDesc string) report.Header {
	h := cfg.Header
	h.Date = time.Now().UTC().Truncate(time.Second)
	h.Link, h.LinkOptions = cfg.Link, linkDesc
	h.Origin = orgDesc
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
	h.Systems = nil
	for _, s := range cfg.Systems {
		h.Systems = append(h.Systems, s.Info)
	}
	h.PageCache = cfg.PageCacheNote
	if cfg.DropCaches {
		h.PageCache = "dropped (sync; echo 3 > /proc/sys/vm/drop_caches) after every mount is ready"
	}
	return h
}

// label names case c on system s in progress lines.
func (r *run) label(c scenario.Case, s System) string {
	if len(r.cfg.Systems) > 1 {
		return c.Name + " [" + s.Info.Name + "]"
	}
	return c.Name
}

// runCase runs case c's trials on every system that can run it, alternating between
// them, and returns a result per system. *stopped is what stopped the whole run: once
// set, the remaining trials and cases are not run.
func (r *run) runCase(ctx context.Context, c scenario.Case, stopped *error) []report.CaseResult {
	results, active := r.caseSystems(c, *stopped)
trials:
	for n := 1; n <= r.cfg.Trials; n++ {
		for _, i := range active {
			if *stopped != nil {
				break trials
			}
			if err := ctx.Err(); err != nil {
				*stopped = err
				break trials
			}
			s := r.cfg.Systems[i]
			t, err := r.trial(ctx, c, s, n)
			results[i].Trials = append(results[i].Trials, t)
			if t.Error != "" {
				fmt.Fprintf(r.cfg.Progress, "%s, trial %d/%d: FAILED after %.1fs: %s\n", r.label(c, s), n, r.cfg.Trials, t.Elapsed, t.Error)
			} else {
				fmt.Fprintf(r.cfg.Progress, "%s, trial %d/%d: %.1fs\n", r.label(c, s), n, r.cfg.Trials, t.Elapsed)
			}
			if err != nil {
				*stopped = err
			}
		}
	}
	return results
}

// caseSystems returns a result per system for case c, with the reason a system does not
// run it filled in, and the indexes of the systems that do.
func (r *run) caseSystems(c scenario.Case, stopped error) ([]report.CaseResult, []int) {
	results := make([]report.CaseResult, len(r.cfg.Systems))
	var active []int
	for i, s := range r.cfg.Systems {
		cr := report.CaseResult{Scenario: c.Scenario, Name: c.Name, System: s.Info.Name}
		switch {
		case stopped != nil:
			cr.Skipped = "not run: the run stopped before it: " + stopped.Error()
		case s.Info.Unavailable != "":
			cr.Skipped = s.Info.Unavailable
		case c.Unavailable != "":
			cr.Skipped = c.Unavailable
		case s.NotFor != nil && s.NotFor(c.Scenario) != "":
			cr.NotApplicable = s.NotFor(c.Scenario)
		default:
			if cr.Skipped = r.cannotRun(c); cr.Skipped == "" {
				active = append(active, i)
			}
		}
		if cr.Skipped != "" && stopped == nil {
			fmt.Fprintf(r.cfg.Progress, "%s: cannot run: %s\n", r.label(c, s), cr.Skipped)
		}
		results[i] = cr
	}
	return results, active
}

// run is the state shared by the trials of one Run.
type run struct {
	cfg      Config
	org      originServer
	linkURL  string
	filesDir string  // the origin's files on disk, or ""
	bucket   *Bucket // the bucket behind the link (OriginS3), or nil
}

// figuresOrigin is an origin with figures of its own beyond origin.Stats (MinIO: the
// bytes down the link), read by the Stats call before it; its error says the counters
// could not be read, and the trial then has no origin figures.
type figuresOrigin interface {
	trialFigures() (scenario.Figures, error)
}

// checkDisk fails when dir has less free disk than files need (with diskMargin).
func checkDisk(dir string, files map[string]origin.File, what string) error {
	var need int64
	for _, f := range files {
		need += f.Size
	}
	need = int64(float64(need) * diskMargin)
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("bench: cannot check free disk at %s: %w", dir, err)
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free < need {
		return fmt.Errorf("bench: %s needs %.0f MB of free disk at %s, which has %.0f MB (give --temp-dir elsewhere)",
			what, float64(need)/1e6, dir, float64(free)/1e6)
	}
	return nil
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

// trial runs case c once on system s, on a fresh cache and mountpoint. Its error stops
// the run: a data mismatch or the end of ctx; any other failure is only the trial's.
func (r *run) trial(ctx context.Context, c scenario.Case, s System, n int) (report.Trial, error) {
	t := report.Trial{Trial: n}
	start := time.Now()
	dir, err := os.MkdirTemp(r.cfg.TempDir, "playhead-bench-")
	if err != nil {
		t.Error = err.Error()
		return t, nil
	}
	defer os.RemoveAll(dir)
	sizes := make(map[string]int64, len(c.Files))
	for p, f := range c.Files {
		sizes[p] = f.Size
	}
	env := &trialEnv{run: r, sut: s.SUT, req: MountRequest{
		OriginURL: r.linkURL,
		CacheDir:  filepath.Join(dir, "cache"),
		Dir:       filepath.Join(dir, "mnt"),
		ReadyFile: c.ReadyFile,
		Scenario:  c.Scenario,
		Files:     sizes,
		FilesDir:  r.filesDir,
		Bucket:    r.bucket,
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
	var countErr error
	if fo, ok := r.org.(figuresOrigin); ok {
		var extra scenario.Figures
		extra, countErr = fo.trialFigures()
		maps.Copy(figs, extra)
	}
	if countErr == nil {
		figs[scenario.FigOriginBytes] = float64(stats.BytesWritten)
		figs[scenario.FigOriginRequests] = float64(stats.Requests)
	}
	figs[scenario.FigNewConns] = float64(stats.NewConns)
	if env.rss > 0 {
		figs[scenario.FigPeakRSS] = float64(env.rss)
	}
	if env.cpuOK {
		figs[scenario.FigCPU] = env.cpu.Seconds()
	}
	scenario.Derive(figs)
	t.Figures = figs
	t.Reads = env.reads
	if err := errors.Join(stopErr, env.sampleErr, countErr); err != nil {
		t.Error = err.Error()
	}
	return t, nil
}

// trialEnv is the scenario.Env of one trial.
type trialEnv struct {
	run   *run
	sut   SUT
	req   MountRequest
	reads []scenario.Read // what the scenario recorded

	cur     Mounted // the live mount, nil when none
	mounted bool    // a mount succeeded in this trial

	// The last mount's daemon, sampled just before it was stopped.
	rss       int64
	cpu       time.Duration
	cpuOK     bool
	sampleErr error
}

var (
	_ scenario.Env           = (*trialEnv)(nil)
	_ scenario.ReadRecorder  = (*trialEnv)(nil)
	_ scenario.DirEnv        = (*trialEnv)(nil)
	_ scenario.OriginCounter = (*trialEnv)(nil)
)

// RecordReads implements scenario.ReadRecorder.
func (e *trialEnv) RecordReads(reads []scenario.Read) { e.reads = reads }

// dirMounted is a Mounted whose files are a directory of this machine.
type dirMounted interface {
	Dir() string
}

// MountDir implements scenario.DirEnv.
func (e *trialEnv) MountDir() string {
	if d, ok := e.cur.(dirMounted); ok {
		return d.Dir()
	}
	return ""
}

// OriginCounts implements scenario.OriginCounter: the origin's counters since the
// mount was ready. The origin's figures of the whole trial are read the same way.
func (e *trialEnv) OriginCounts() (bytes, requests int64, err error) {
	st := e.run.org.Stats()
	if fo, ok := e.run.org.(figuresOrigin); ok {
		if _, err := fo.trialFigures(); err != nil {
			return 0, 0, err
		}
	}
	return st.BytesWritten, st.Requests, nil
}

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
	m, err := e.sut.Mount(ctx, e.req)
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
	if !errors.Is(err, ErrNoDaemon) {
		errs = append(errs, err)
	}
	cpu, err := m.CPU()
	if !errors.Is(err, ErrNoDaemon) {
		errs = append(errs, err)
	}
	e.rss, e.cpu, e.cpuOK = rss, cpu, err == nil
	e.sampleErr = errors.Join(errs...)
	if e.sampleErr != nil {
		e.sampleErr = fmt.Errorf("sample the daemon: %w", e.sampleErr)
	}
	return m.Unmount()
}

// withDefaults fills in the zero fields of cfg.
func (cfg Config) withDefaults() Config {
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
	if cfg.Origin == "" {
		cfg.Origin = OriginBuiltin
	}
	if len(cfg.Systems) == 0 {
		cfg.Systems = []System{{Info: report.System{Name: "playhead", Kind: report.KindSUT}, SUT: cfg.SUT}}
	}
	return cfg
}

// startOrigin starts the origin cfg names, serving files (written under filesDir for
// nginx), and returns it with its URL and description; minio is set for OriginS3.
func startOrigin(ctx context.Context, cfg Config, files map[string]origin.File, filesDir string) (org originServer, orgURL, orgDesc string, minio *minioOrigin, err error) {
	switch cfg.Origin {
	case OriginBuiltin:
		var lf *os.File
		opts := origin.Options{Files: files}
		if p := os.Getenv(originLogEnv); p != "" {
			// A line per request the origin answers, for tracing what it wrote.
			if lf, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
				return nil, "", "", nil, fmt.Errorf("%s: %w", originLogEnv, err)
			}
			opts.RequestLog = lf
		}
		b := origin.New(opts)
		if orgURL, err = b.Start("127.0.0.1:0"); err != nil {
			if lf != nil {
				lf.Close()
			}
			return nil, "", "", nil, err
		}
		org, orgDesc = b, "builtin (generated files served from memory, real media from disk, by this binary)"
		if lf != nil {
			org = loggedOrigin{b, lf}
		}
	case OriginNginx:
		n, err := startNginx(cfg.Nginx, filesDir, cfg.TempDir)
		if err != nil {
			return nil, "", "", nil, err
		}
		org, orgURL, orgDesc = n, n.url, n.describe()
	case OriginS3:
		bin, err := FindMinIO(cfg.MinIO)
		if err != nil {
			return nil, "", "", nil, err
		}
		if err := checkDisk(cfg.TempDir, files, "MinIO's copy of the files"); err != nil {
			return nil, "", "", nil, err
		}
		if minio, err = startMinIO(ctx, bin, cfg.TempDir); err != nil {
			return nil, "", "", nil, err
		}
		fmt.Fprintf(cfg.Progress, "uploading the origin's files to MinIO at %s, bucket %q\n", minio.addr, minio.bucket.Name)
		if err := minio.seed(ctx, files); err != nil {
			minio.Close()
			return nil, "", "", nil, err
		}
		org, orgURL = minio, "http://"+minio.addr+"/"
	default:
		return nil, "", "", nil, fmt.Errorf("bench: unknown origin %q (have %s, %s, %s)", cfg.Origin, OriginBuiltin, OriginNginx, OriginS3)
	}
	return org, orgURL, orgDesc, minio, nil
}

// loggedOrigin is the built-in origin with its request log (originLogEnv), closed after
// the server so that no answer writes to a closed file.
type loggedOrigin struct {
	*origin.Server
	log *os.File
}

func (o loggedOrigin) Close() error {
	err := o.Server.Close()
	return errors.Join(err, o.log.Close())
}
