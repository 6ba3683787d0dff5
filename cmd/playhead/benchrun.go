package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/playhead/playhead/bench/report"
	"github.com/playhead/playhead/bench/runner"
	"github.com/playhead/playhead/bench/scenario"
)

type benchRunFlags struct {
	scenarios  []string
	link       string
	trials     int
	jsonPath   string
	quick      bool
	allowStale bool
	tempDir    string
	mountArgs  []string
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

Scenarios: ` + strings.Join(scenario.Names, ", ") + `. It refuses to run a binary older than
the source tree it is started in (make build first, or --allow-stale).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runBench(ctx, cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.scenarios, "scenario", nil, "scenario to run (repeat or comma-separate; default all): "+strings.Join(scenario.Names, ", "))
	fl.StringVar(&f.link, "link", "far", "emulated link: far, cloud, lan or loopback")
	fl.IntVar(&f.trials, "trials", 5, "trials per scenario, each on a fresh cache and mount")
	fl.StringVar(&f.jsonPath, "json", "", "also write every trial's figures and the header to this JSON file")
	fl.BoolVar(&f.quick, "quick", false, "sizes and counts about 10x smaller: a smoke run of a few minutes")
	fl.BoolVar(&f.allowStale, "allow-stale", false, "run even if the binary is older than the source tree")
	fl.StringVar(&f.tempDir, "temp-dir", "", "where trials put their caches and mountpoints (default $TMPDIR or /tmp)")
	fl.StringSliceVar(&f.mountArgs, "mount-arg", nil, "extra flag for the mounts under test (repeatable, e.g. --mount-arg=--read-ahead=0)")
	return cmd
}

func runBench(ctx context.Context, cmd *cobra.Command, f benchRunFlags) error {
	out, progress := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if f.trials < 1 {
		return fmt.Errorf("bad --trials %d: want at least 1", f.trials)
	}
	sizes := scenario.Full()
	if f.quick {
		sizes = scenario.Quick()
	}
	cases, err := scenario.Cases(f.scenarios, sizes)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the binary under test: %w", err)
	}

	built, builtNote := binaryBuildTime(exe)
	wd, _ := os.Getwd()
	fresh, err := runner.CheckFresh(built, wd)
	if err != nil {
		var stale *runner.StaleError
		if !f.allowStale || !errors.As(err, &stale) {
			return err
		}
		fresh = "STALE, run anyway (--allow-stale): " + stale.Detail()
	}
	if builtNote != "" {
		fresh += "; " + builtNote
	}

	cfg := runner.Config{
		SUT:      &runner.ProcessSUT{Exe: exe, Args: f.mountArgs},
		Cases:    cases,
		Link:     f.link,
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
	fmt.Fprintf(progress, "%s\nrunning %d case(s) x %d trial(s) over the %q link\n", versionString(), len(cases), f.trials, f.link)

	rep, runErr := runner.Run(ctx, cfg)
	if rep == nil {
		return runErr
	}
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
