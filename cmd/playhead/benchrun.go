package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/playhead/playhead/bench/plot"
	"github.com/playhead/playhead/bench/report"
	"github.com/playhead/playhead/bench/runner"
	"github.com/playhead/playhead/bench/scenario"
	"github.com/playhead/playhead/internal/units"
)

type benchRunFlags struct {
	scenarios  []string
	caseNames  []string
	link       string
	trials     int
	jsonPath   string
	quick      bool
	bulkSize   string
	allowStale bool
	tempDir    string
	mountArgs  []string

	compare     []string
	ceilings    bool
	origin      string
	minio       string
	plotDir     string
	rclone      string
	rcloneTuned string
}

func benchRunCmd() *cobra.Command {
	var f benchRunFlags
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the streaming benchmark: this binary's mount against a built-in origin behind an emulated link",
		Long: `run serves generated files from a built-in origin behind an emulated link, and for every
scenario and trial mounts them with this binary's own "mount" (a child process) on a fresh
cache, plays, seeks, scans or copies them, checks every byte, and prints a table of
medians over trials [min–max]: startup, freezes, frozen time, worst stall, p99 read
latency, throughput, origin bytes and requests, waste, new connections, and the daemon's
peak RSS and CPU.

With --compare rclone the same trials run through rclone mount of the same origin, once
with rclone's defaults and once with its streaming flags for the link, each a column.
Ceilings are columns too (--ceilings, on by default): a plain HTTP client with one
connection and with 16 parallel ranges (the link's limit), and the files read from the
local disk (the disk's limit), where they mean something. --plot DIR draws each case's
read latency over time, a panel per system, freezes marked.

--origin picks the server behind the link: the built-in one, nginx serving the files
from disk, or s3: MinIO (a separate process; --minio, else ~/.cache/playhead/bin/minio
or PATH) with the files uploaded to a bucket "bench". Then playhead mounts s3://bench/
with only the --s3-endpoint (the link), --s3-path-style and --s3-region flags it needs
and the credentials in its environment, rclone mounts the bucket with its s3 backend,
the HTTP ceilings read presigned URLs, and the origin's bytes and requests are MinIO's
own counts, read from its metrics before and after each trial.

Scenarios: ` + strings.Join(scenario.Names, ", ") + `, and ` + scenario.ClusterName + `, which runs alone and
only when named: eight daemons of this binary with the peer tier, once, in phases of its
own (see its table). It refuses to run a binary older than
the source tree it is started in (make build first, or --allow-stale).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runBench(ctx, cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.scenarios, "scenario", nil, "scenario to run (repeat or comma-separate; default all): "+strings.Join(scenario.Names, ", ")+"; or "+scenario.ClusterName+" alone")
	fl.StringSliceVar(&f.caseNames, "case", nil, "run only the selected scenarios' cases whose name contains this text (repeat or comma-separate), e.g. \"play 20MB/s\"")
	fl.StringVar(&f.link, "link", "far", "emulated link: far, cloud, lan or loopback in user space, or far-shared or cloud-kernel shaped by the kernel (root: a network namespace, TUN devices and tc tbf)")
	fl.IntVar(&f.trials, "trials", 5, "trials per scenario, each on a fresh cache and mount")
	fl.StringVar(&f.jsonPath, "json", "", "also write every trial's figures and the header to this JSON file")
	fl.BoolVar(&f.quick, "quick", false, "sizes and counts about 10x smaller: a smoke run of a few minutes")
	fl.StringVar(&f.bulkSize, "bulk-size", "", "size of the bulk scenario's file instead of 1GiB (e.g. 300MB, the mount issue's figure)")
	fl.BoolVar(&f.allowStale, "allow-stale", false, "run even if the binary is older than the source tree")
	fl.StringVar(&f.tempDir, "temp-dir", "", "where trials put their caches and mountpoints (default $TMPDIR or /tmp)")
	fl.StringSliceVar(&f.mountArgs, "mount-arg", nil, "extra flag for the mounts under test (repeatable, e.g. --mount-arg=--read-ahead=0)")
	fl.StringSliceVar(&f.compare, "compare", nil, "also run the trials through another tool's mount: rclone (its defaults and its streaming flags, two columns)")
	fl.BoolVar(&f.ceilings, "ceilings", true, "add the link's and the disk's limits as columns (plain HTTP client with 1 and 16 connections, local disk read)")
	fl.StringVar(&f.origin, "origin", "builtin", "server behind the link: builtin, nginx serving the files from disk, or s3 (MinIO serving them from a bucket, mounted as s3://bench/)")
	fl.StringVar(&f.minio, "minio", "", "MinIO server binary for --origin s3 (default: $PLAYHEAD_TESTBIN/bin/minio, ~/.cache/playhead/bin/minio, else PATH)")
	fl.StringVar(&f.plotDir, "plot", "", "write a PNG per case to this directory: read latency over time per system, freezes marked")
	fl.StringVar(&f.rclone, "rclone", "", "rclone binary for --compare rclone (default: bin/deps/rclone next to this binary, else PATH)")
	fl.StringVar(&f.rcloneTuned, "rclone-tuned", "", "flags for the tuned rclone column instead of the built-in ones for the link (one string)")
	return cmd
}

func runBench(ctx context.Context, cmd *cobra.Command, f benchRunFlags) error {
	if slices.Contains(f.scenarios, scenario.ClusterName) {
		return runClusterBench(ctx, cmd, f)
	}
	out, progress := cmd.OutOrStdout(), cmd.ErrOrStderr()
	cases, err := benchCases(f, progress)
	if err != nil {
		return err
	}
	exe, fresh, err := binaryUnderTest(f.allowStale)
	if err != nil {
		return err
	}
	systems, err := benchSystems(exe, f)
	if err != nil {
		return err
	}
	cfg := benchConfig(f, systems, cases, fresh, progress)
	fmt.Fprintf(progress, "%s\nrunning %d case(s) x %d trial(s) x %d system(s) over the %q link\n",
		versionString(), len(cases), f.trials, len(systems), f.link)

	rep, runErr := runner.Run(ctx, cfg)
	if rep == nil {
		return runErr
	}
	if err := writeBenchReport(out, rep, f); err != nil {
		return err
	}
	if runErr != nil {
		if scenario.IsMismatch(runErr) {
			return fmt.Errorf("RUN ABORTED: the filesystem returned wrong bytes: %w", runErr)
		}
		return runErr
	}
	failed := 0
	for _, c := range rep.Cases {
		if c.Failed() {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d case(s) failed or could not run (see FAILURES)", failed, len(rep.Cases))
	}
	return nil
}

// benchCases checks the flags and returns the cases they select, at the sizes they set.
func benchCases(f benchRunFlags, progress io.Writer) ([]scenario.Case, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	if f.trials < 1 {
		return nil, fmt.Errorf("bad --trials %d: want at least 1", f.trials)
	}
	sizes := scenario.Full()
	if f.quick {
		sizes = scenario.Quick()
	}
	if f.bulkSize != "" {
		n, err := units.ParseBytes(f.bulkSize)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad --bulk-size %q: want a size such as 300MB or 1GiB", f.bulkSize)
		}
		sizes.BulkFile = n
	}
	if len(f.scenarios) == 0 || slices.Contains(f.scenarios, "players") {
		fmt.Fprintln(progress, "players: preparing the media (generated with ffmpeg the first time, about 3.5 min, then cached)")
	}
	cases, err := scenario.Cases(f.scenarios, sizes)
	if err != nil || len(f.caseNames) == 0 {
		return cases, err
	}
	var picked []scenario.Case
	for _, c := range cases {
		if slices.ContainsFunc(f.caseNames, func(n string) bool { return strings.Contains(c.Name, n) }) {
			picked = append(picked, c)
		}
	}
	if len(picked) == 0 {
		names := make([]string, len(cases))
		for i, c := range cases {
			names[i] = c.Name
		}
		return nil, fmt.Errorf("bad --case %q: no case's name contains it; the cases: %s",
			strings.Join(f.caseNames, ","), strings.Join(names, "; "))
	}
	return picked, nil
}

// binaryUnderTest returns this binary's path and the header's line on it: built after
// every source file of the tree the bench runs in, else an error, unless allowStale.
func binaryUnderTest(allowStale bool) (exe, fresh string, err error) {
	if exe, err = os.Executable(); err != nil {
		return "", "", fmt.Errorf("find the binary under test: %w", err)
	}
	fresh, err = benchFreshness(exe, allowStale)
	return exe, fresh, err
}

// benchFreshness is the header's line on the binary exe: built after every source file
// of the tree the bench runs in, else an error, unless allowStale.
func benchFreshness(exe string, allowStale bool) (string, error) {
	built, builtNote := binaryBuildTime(exe)
	wd, _ := os.Getwd()
	fresh, err := runner.CheckFresh(built, wd)
	if err != nil {
		var stale *runner.StaleError
		if !allowStale || !errors.As(err, &stale) {
			return "", err
		}
		fresh = "STALE, run anyway (--allow-stale): " + stale.Detail()
	}
	if builtNote != "" {
		fresh += "; " + builtNote
	}
	return fresh, nil
}

// benchConfig is the runner's configuration for flags f.
func benchConfig(f benchRunFlags, systems []runner.System, cases []scenario.Case, fresh string, progress io.Writer) runner.Config {
	cfg := runner.Config{
		Systems:  systems,
		Cases:    cases,
		Link:     f.link,
		Origin:   f.origin,
		MinIO:    f.minio,
		Trials:   f.trials,
		TempDir:  f.tempDir,
		Progress: progress,
		Header: report.Header{
			Version:   versionString(),
			Commit:    commit,
			BuildTime: buildTime,
			Freshness: fresh,
			Quick:     f.quick,
		},
	}
	if len(f.mountArgs) > 0 {
		cfg.Header.Notes = append(cfg.Header.Notes, "mount flags: "+strings.Join(f.mountArgs, " "))
	}
	if os.Geteuid() == 0 {
		cfg.DropCaches = true
	} else {
		cfg.PageCacheNote = "NOT dropped: not root (cache files written by an earlier mount may be read from memory)"
	}
	return cfg
}

// writeBenchReport prints the report's tables and writes its JSON and plots where the
// flags ask for them.
func writeBenchReport(out io.Writer, rep *report.Report, f benchRunFlags) error {
	fmt.Fprintln(out)
	if err := report.Print(out, rep); err != nil {
		return err
	}
	if f.jsonPath != "" {
		if err := report.WriteJSON(f.jsonPath, rep); err != nil {
			return err
		}
		fmt.Fprintf(out, "\nevery trial's figures: %s\n", f.jsonPath)
	}
	if f.plotDir != "" {
		files, err := plot.Write(f.plotDir, rep)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "plots: %d file(s) in %s\n", len(files), f.plotDir)
	}
	return nil
}

// benchSystems are the report's columns: this binary's mount, the comparators asked
// for, and the ceilings.
func benchSystems(exe string, f benchRunFlags) ([]runner.System, error) {
	command := "playhead " + strings.Join(append([]string{"mount", "URL", "MNT", "--cache-dir", "CACHE"}, f.mountArgs...), " ")
	if f.origin == runner.OriginS3 {
		command = runner.PlayheadS3Command(f.mountArgs)
	}
	systems := []runner.System{{
		Info: report.System{Name: "playhead", Kind: report.KindSUT, Version: versionString(),
			Command: command},
		SUT: &runner.ProcessSUT{Exe: exe, Args: f.mountArgs},
	}}
	for _, c := range f.compare {
		switch c {
		case "rclone":
			rc, err := runner.FindRclone(f.rclone, exe)
			var tuned []string
			if f.rcloneTuned != "" {
				tuned = strings.Fields(f.rcloneTuned)
			}
			systems = append(systems, runner.RcloneSystems(rc, err, f.link, f.origin, tuned)...)
		default:
			return nil, fmt.Errorf("bad --compare %q: the comparator is rclone", c)
		}
	}
	if f.ceilings {
		local := runner.LocalDiskSystem()
		if os.Geteuid() != 0 {
			local.Info.Unavailable = "needs root to drop the page cache: the files were just written, so without it they would be read from memory, not disk"
		}
		systems = append(systems, runner.HTTPOneConnSystem(), runner.HTTPParallelSystem(), runner.HTTPPerPlayerSystem(), local)
	}
	return systems, nil
}

// binaryBuildTime is when the binary under test was built: the Makefile's stamp, or the
// executable's modification time for a binary built without it (then the note says so).
func binaryBuildTime(exe string) (time.Time, string) {
	if t, err := time.Parse(time.RFC3339, buildTime); err == nil {
		return t, ""
	}
	st, err := os.Stat(exe)
	if err != nil {
		return time.Time{}, "no build time stamp and the binary cannot be stat'ed"
	}
	return st.ModTime(), "no build time stamp (not built with make); used the binary's mtime " + st.ModTime().UTC().Format(time.RFC3339)
}
