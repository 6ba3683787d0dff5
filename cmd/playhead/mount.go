package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/spf13/cobra"

	"github.com/playhead/playhead/fusefs"
	"github.com/playhead/playhead/internal/units"
	"github.com/playhead/playhead/metrics"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/sources"
	"github.com/playhead/playhead/vfs"
)

// mountFlags are the user-facing knobs of a mount, bound to vfs.Options in options().
type mountFlags struct {
	cacheDir   string
	cacheSize  string
	readAhead  string
	listTTL    time.Duration
	ioTimeout  time.Duration
	logLevel   string
	allowOther bool
	metrics    string
	debugFUSE  bool
	cpuProfile string
	kernelRA   string
	uid, gid   uint32
	umask      string
	directIO   string // --cache-direct-io: auto, on or off (flagcheck.go)
	source     sourceFlags
	peer       peerFlags // the peer tier (peerflags.go)
}

func (m *mountFlags) bind(cmd *cobra.Command) {
	d := vfs.DefaultOptions()
	f := cmd.Flags()
	f.StringVar(&m.cacheDir, "cache-dir", d.Cache.Dir, "directory of the block cache")
	f.StringVar(&m.cacheSize, "cache-size", "20GiB", "size limit of the block cache")
	f.StringVar(&m.readAhead, "read-ahead", "64MiB", "largest read-ahead window per sequential reader (0 disables read-ahead)")
	f.DurationVar(&m.listTTL, "list-ttl", d.ListTTL, "how long directory listings and sizes are cached")
	f.DurationVar(&m.ioTimeout, "io-timeout", d.Fetch.IOTimeout, "a read fails with EIO after the origin made no progress this long")
	f.StringVar(&m.logLevel, "log-level", "info", "debug, info, warn or error")
	f.BoolVar(&m.allowOther, "allow-other", false, "let other users read the mount (media servers running as their own user)")
	f.StringVar(&m.metrics, "metrics", "", "serve Prometheus metrics on this address (for example 127.0.0.1:9180)")
	f.BoolVar(&m.debugFUSE, "debug-fuse", false, "log every FUSE request")
	f.StringVar(&m.kernelRA, "kernel-read-ahead", "256KiB", "the kernel's own read-ahead for the mount, and so its largest read (up to 1MiB): larger copies faster, smaller wastes less after a seek")
	f.StringVar(&m.directIO, "cache-direct-io", directIOAuto, "write cache blocks with direct I/O: auto (blocks from fast origins while the disk is behind), on (every block) or off (never: for file systems where direct I/O misbehaves)")
	f.StringVar(&m.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the daemon to this file until unmount")
	f.MarkHidden("cpuprofile")
	f.Uint32Var(&m.uid, "uid", uint32(os.Getuid()), "owner of every file and directory")
	f.Uint32Var(&m.gid, "gid", uint32(os.Getgid()), "group of every file and directory")
	f.StringVar(&m.umask, "umask", "022", "octal permission bits to clear: files show 0444 and directories 0555 less these (027: only --gid may read, 077: only --uid)")
	m.source.bind(cmd, sources.Builtin)
	m.peer.bind(cmd)
}

// owner parses --uid, --gid and --umask into fusefs.MountOptions.Owner.
func (m *mountFlags) owner() (*fusefs.Owner, error) {
	umask, err := strconv.ParseUint(strings.TrimPrefix(m.umask, "0o"), 8, 32)
	if err != nil || umask > 0o777 {
		return nil, fmt.Errorf("bad --umask %q: want octal permission bits, 000 to 777", m.umask)
	}
	return &fusefs.Owner{UID: m.uid, GID: m.gid, Umask: uint32(umask)}, nil
}

func (m *mountFlags) options() (vfs.Options, error) {
	o := vfs.DefaultOptions()
	if err := m.peer.check(); err != nil {
		return o, err
	}
	if m.cacheDir == "" {
		return o, fmt.Errorf("bad --cache-dir: empty (the default is %s)", vfs.DefaultCacheDir())
	}
	o.Cache.Dir = m.cacheDir
	size, err := units.ParseBytes(m.cacheSize)
	if err != nil {
		return o, fmt.Errorf("bad --cache-size: %w", err)
	}
	// The struct's 0 means the 20 GiB default; a user who types 0 means something else.
	if minSize := 4 * o.Cache.BlockSize; size < minSize {
		return o, fmt.Errorf("bad --cache-size %q: the cache needs at least %s (4 blocks)", m.cacheSize, units.FormatBytes(minSize))
	}
	o.Cache.MaxBytes = size
	ra, err := units.ParseBytes(m.readAhead)
	if err != nil {
		return o, fmt.Errorf("bad --read-ahead: %w", err)
	}
	if err := checkReadAhead("--read-ahead", m.readAhead, ra, o.Cache.BlockSize); err != nil {
		return o, err
	}
	o.ReadAhead.MaxWindow = ra
	if err := checkCacheHoldsReadAhead(m, o); err != nil {
		return o, err
	}
	if err := applyCacheDirectIO(&o, m.directIO); err != nil {
		return o, err
	}
	if ra > 0 && ra < o.ReadAhead.InitialWindow {
		o.ReadAhead.InitialWindow = ra
	}
	if m.listTTL < 0 {
		return o, fmt.Errorf("bad --list-ttl %v: must not be negative (0 turns listing caching off)", m.listTTL)
	}
	// The struct's 0 means the 30 s default, not "never time out".
	if m.ioTimeout <= 0 {
		return o, fmt.Errorf("bad --io-timeout %v: must be positive", m.ioTimeout)
	}
	o.ListTTL = m.listTTL
	if m.listTTL == 0 {
		o.ListTTL = -1 // the flag's 0 means "no caching"; the struct's 0 means "default"
	}
	o.Fetch.IOTimeout = m.ioTimeout
	return o, o.Validate()
}

// kernelReadAhead parses --kernel-read-ahead into fusefs.MountOptions.KernelReadAhead.
func (m *mountFlags) kernelReadAhead() (int, error) {
	ra, err := units.ParseBytes(m.kernelRA)
	if err != nil {
		return 0, fmt.Errorf("bad --kernel-read-ahead: %w", err)
	}
	if ra < 4<<10 || ra > fusefs.DefaultMaxRead {
		return 0, fmt.Errorf("bad --kernel-read-ahead %s: must be between 4KiB and 1MiB (the largest FUSE read)", m.kernelRA)
	}
	return int(ra), nil
}

func mountCmd() *cobra.Command {
	var m mountFlags
	cmd := &cobra.Command{
		Use:   "mount SOURCE MOUNTPOINT",
		Short: "Mount SOURCE (" + sources.Builtin.Summary() + ") read-only at MOUNTPOINT",
		Long: `Mount a remote source read-only. Runs in the foreground until SIGINT or SIGTERM,
then unmounts cleanly.

SOURCE is ` + sources.Builtin.Summary() + `. An http(s) URL names a directory
the server lists (nginx or Apache autoindex, Go's http.FileServer) or a single file.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMount(cmd.Context(), &m, args[0], args[1])
		},
	}
	m.bind(cmd)
	return cmd
}

func runMount(ctx context.Context, m *mountFlags, spec, mountpoint string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	log, err := newLogger(m.logLevel)
	if err != nil {
		return err
	}
	opts, err := m.options()
	if err != nil {
		return err
	}
	owner, err := m.owner()
	if err != nil {
		return err
	}
	opts.Logger = log
	if err := checkMountpoint(mountpoint); err != nil {
		return err
	}
	src, scheme, err := m.openSource(ctx, spec, opts.Fetch.IOTimeout)
	if err != nil {
		return err
	}
	kernelRA, err := m.kernelReadAhead()
	if err != nil {
		return err
	}
	var tier *peerTier
	if m.peer.enabled() {
		if tier, err = m.peer.start(src, spec, opts.Cache.BlockSize, log); err != nil {
			return err // start closed what it opened
		}
		src = tier.src
	}
	var met *metrics.Metrics
	if m.metrics != "" {
		met = metrics.New(scheme)
		opts.Fetch.Observer = met
	}
	fsys, err := newFS(src, opts, tier)
	if err != nil {
		return err
	}
	if met != nil {
		watchMount(met, fsys, tier)
	}
	mounted := false
	defer func() { closeMount(fsys, tier, mounted, log) }()
	if m.cpuProfile != "" {
		if err := startCPUProfile(m.cpuProfile); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	// Listen before mounting: a bad --metrics address fails the command, rather than
	// leaving a mount running without the metrics asked for.
	var metricsLn net.Listener
	if m.metrics != "" {
		if metricsLn, err = net.Listen("tcp", m.metrics); err != nil {
			return fmt.Errorf("bad --metrics %q: %w", m.metrics, err)
		}
		defer metricsLn.Close()
	}
	server, err := fusefs.Mount(fsys, mountpoint, fusefs.MountOptions{AllowOther: m.allowOther, Debug: m.debugFUSE, KernelReadAhead: kernelRA, Owner: owner})
	if err != nil {
		return err
	}
	if metricsLn != nil {
		defer serveMetrics(met, metricsLn, log).Close()
	}
	mounted = true
	log.Info("mounted", "source", src.String(), "mountpoint", mountpoint, "cache", opts.Cache.Dir,
		"cache_size", opts.Cache.MaxBytes, "read_ahead", opts.ReadAhead.MaxWindow)

	return serveUntilStopped(server, mountpoint, log)
}

// closeMount stops the peer tier, then closes the FS (landing the blocks still queued
// for the cache), and logs the counters of a mount that ran.
func closeMount(fsys *vfs.FS, tier *peerTier, mounted bool, log *slog.Logger) {
	if tier != nil {
		tier.stop() // before the FS closes: no peer request reads a closed FS
	}
	fsys.Close()
	if !mounted {
		return // the error says what went wrong; counters of nothing would only add noise
	}
	if tier != nil {
		log.Info("peer tier", "stats", fmt.Sprintf("%+v", tier.src.Stats()))
	}
	f, k := fsys.FetchStats(), fsys.CacheStats()
	log.Info("unmounted", "origin_requests", f.Requests, "origin_bytes", f.BytesFetched,
		"blocks_from_cache", f.BlocksCached, "cache_write_errors", f.CacheWriteErr,
		"cache_direct_writes", k.DirectWrites, "cache_direct_busy", k.DirectBusy, "blocks_held_by_peers", f.BlocksHeld)
}

// newFS opens the FS over src and, with the peer tier, serves the other nodes from it.
// The tier is stopped when the FS cannot be opened or served.
func newFS(src source.Source, opts vfs.Options, tier *peerTier) (*vfs.FS, error) {
	fsys, err := vfs.New(src, opts)
	if err == nil && tier != nil {
		if err = tier.serve(fsys); err != nil {
			fsys.Close()
		}
	}
	if err != nil && tier != nil {
		tier.stop()
	}
	return fsys, err
}

// openSource builds the source for spec and checks that the origin answers within the
// I/O timeout, so a bad URL fails the command before anything is mounted.
func (m *mountFlags) openSource(ctx context.Context, spec string, ioTimeout time.Duration) (source.Source, string, error) {
	src, scheme, err := m.source.open(spec, ioTimeout)
	if err != nil {
		return nil, "", err
	}
	probeCtx, cancel := context.WithTimeout(ctx, ioTimeout)
	defer cancel()
	if err := sources.Probe(probeCtx, src); err != nil {
		return nil, "", err
	}
	return src, scheme, nil
}

// startCPUProfile starts a Go CPU profile written to path (--cpuprofile).
func startCPUProfile(path string) error {
	pf, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bad --cpuprofile: %w", err)
	}
	return pprof.StartCPUProfile(pf)
}

// watchMount makes met poll the engine's counters and, with the peer tier, the tier's.
func watchMount(met *metrics.Metrics, fsys *vfs.FS, tier *peerTier) {
	met.Watch(fsys)
	if tier != nil {
		met.WatchPeer(tier)
	}
}

// serveMetrics serves met on ln until the returned server is closed.
func serveMetrics(met *metrics.Metrics, ln net.Listener, log *slog.Logger) *http.Server {
	srv := &http.Server{Handler: met.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Error("metrics server", "err", err)
		}
	}()
	return srv
}

// serveUntilStopped waits for SIGINT or SIGTERM, then stops the mount (bounded even with
// files held open; the caller closes the engine only after it, when the kernel sends no
// more requests), or for the mount to be removed from outside.
func serveUntilStopped(server *fuse.Server, mountpoint string, log *slog.Logger) error {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	done := make(chan struct{})
	go func() { server.Wait(); close(done) }()
	select {
	case s := <-sig:
		log.Info("unmounting", "signal", s.String())
		if _, err := fusefs.Stop(server, mountpoint, log); err != nil {
			return err
		}
	case <-done:
		log.Warn("mount was removed from outside (fusermount -u or umount)")
	}
	return nil
}

// checkMountpoint refuses a mountpoint that has entries: the mount would hide them until
// unmounted (the kernel allows it, and fusermount3 does too), which looks like lost
// files to whoever opens the directory, and usually means a mistyped path. A missing or
// non-directory mountpoint is reported here too, before FUSE is looked for, so the
// error is about the path even on a machine without FUSE; a stale one (stat fails with
// ENOTCONN) is left for fusefs.Mount to clear.
func checkMountpoint(dir string) error {
	if st, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("mountpoint %s: %w", dir, err)
	} else if err == nil && !st.IsDir() {
		return fmt.Errorf("mountpoint %s is not a directory", dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("mountpoint %s is not empty: mounting would hide what is in it; use an empty directory", dir)
	}
	return nil
}
