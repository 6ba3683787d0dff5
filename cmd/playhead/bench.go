package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/playhead/playhead/bench/play"
	"github.com/playhead/playhead/internal/units"
)

func benchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure streaming: paced playback, freezes and stalls",
	}
	cmd.AddCommand(benchPlayCmd())
	cmd.AddCommand(benchRunCmd())
	return cmd
}

func benchPlayCmd() *cobra.Command {
	var rate, chunk, start, limit string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "play PATH",
		Short: "Play any file (a playhead mount, another tool's mount, a local file) like a video player and count freezes",
		Long: `play reads PATH on a bitrate's schedule, keeping about one chunk ahead like a video
player. A freeze is a read that completes more than 10 ms after its data was due; the
timeline then shifts (rebuffer). It prints startup time, freezes, total frozen time, worst
stall and read latency.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var o play.Options
			var err error
			if o.Rate, err = units.ParseRate(rate); err != nil {
				return fmt.Errorf("bad --rate: %w", err)
			}
			if o.Chunk, err = units.ParseBytes(chunk); err != nil {
				return fmt.Errorf("bad --chunk: %w", err)
			}
			if o.Start, err = units.ParseBytes(start); err != nil {
				return fmt.Errorf("bad --start: %w", err)
			}
			if o.Limit, err = units.ParseBytes(limit); err != nil {
				return fmt.Errorf("bad --limit: %w", err)
			}
			if err := checkPositive("--rate", rate, o.Rate); err != nil {
				return err
			}
			if err := checkPositive("--chunk", chunk, o.Chunk); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := play.PlayFile(ctx, args[0], o)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			res.Print(cmd.OutOrStdout())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&rate, "rate", "3MB/s", "bitrate to play at (MB = 10^6 bytes)")
	f.StringVar(&chunk, "chunk", "256KiB", "bytes per read")
	f.StringVar(&start, "start", "0", "offset to start playing at")
	f.StringVar(&limit, "limit", "0", "bytes to play (0: to the end)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// quietLogger is for the in-process mounts of demo and bench, whose output is a table.
func quietLogger() *slog.Logger {
	if os.Getenv("PLAYHEAD_DEBUG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}
