package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/playhead/playhead/bench/runner"
	"github.com/playhead/playhead/bench/scenario"
)

// runClusterBench runs the cluster scenario: once (it has no trials), on a cluster of
// this binary's daemons behind --link, and prints its own table. It runs alone: its
// phases share one cluster, not the runner's mount per trial.
func runClusterBench(ctx context.Context, cmd *cobra.Command, f benchRunFlags) error {
	out, progress := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if len(f.scenarios) != 1 {
		return fmt.Errorf("bad --scenario: %s runs alone (its phases share one cluster of daemons)", scenario.ClusterName)
	}
	if err := f.validate(); err != nil {
		return err
	}
	if f.origin != runner.OriginBuiltin || len(f.compare) > 0 {
		return errors.New("the cluster scenario runs on the built-in origin and this binary only: drop --origin and --compare")
	}
	exe, fresh, err := binaryUnderTest(f.allowStale)
	if err != nil {
		return err
	}
	sizes := scenario.FullCluster()
	if f.quick {
		sizes = scenario.QuickCluster()
	}
	fmt.Fprintf(progress, "%s\nrunning the cluster scenario once (no trials) over the %q link\n", versionString(), f.link)
	fig, linkDesc, runErr := runner.RunCluster(ctx, runner.ClusterConfig{Exe: exe, Link: f.link, Sizes: sizes,
		TempDir: f.tempDir, MountArgs: f.mountArgs, Progress: progress})
	fmt.Fprintf(out, "\n%s; %s\nlink %s: %s; %s UTC\n", versionString(), fresh, f.link, linkDesc,
		time.Now().UTC().Format(time.DateTime))
	if f.quick {
		fmt.Fprintln(out, "QUICK run: sizes about 10x smaller than the benchmark's")
	}
	if err := fig.Print(out); err != nil {
		return err
	}
	if scenario.IsMismatch(runErr) {
		return fmt.Errorf("RUN ABORTED: the filesystem returned wrong bytes: %w", runErr)
	}
	return runErr
}
