// Command playhead mounts remote files so they read like local ones, and measures how
// well that works (bench) and shows it (demo). Flags are bound to the library's option
// structs here and nowhere else.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Set by the Makefile's -ldflags; benchmarks print them and refuse a stale binary.
var (
	commit    = "unknown"
	buildTime = "unknown"
)

func versionString() string {
	v := "dev"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return fmt.Sprintf("playhead %s (commit %s, built %s)", v, commit, buildTime)
}

func main() {
	root := &cobra.Command{
		Use:           "playhead",
		Short:         "Stream remote files through FUSE with a disk block cache and read-ahead that never freezes playback",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
	}
	root.AddCommand(mountCmd(), benchCmd(), demoCmd(), peersCmd())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "playhead:", strings.TrimPrefix(err.Error(), "playhead: "))
		os.Exit(1)
	}
}

// newLogger returns a text logger to stderr at the named level.
func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("bad --log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}
