package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/playhead/playhead/bench/play"
	"github.com/playhead/playhead/fusefs"
	"github.com/playhead/playhead/internal/units"
	"github.com/playhead/playhead/linkemu"
	"github.com/playhead/playhead/origin"
	"github.com/playhead/playhead/source/sources"
	"github.com/playhead/playhead/vfs"
)

type demoFlags struct {
	size, rate, limit, readAhead string
	link                         string
	verbose                      bool
}

// demoLogger is the in-process mounts' logger: errors only, or everything with
// PLAYHEAD_DEBUG=1 (to see each read's read-ahead decision).
var demoLogger = quietLogger()

func demoCmd() *cobra.Command {
	var d demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Play a sample video over an emulated 200 ms link with read-ahead off and on, and compare freezes",
		Long: `demo generates a deterministic sample media file, serves it from a built-in origin
behind an emulated long-distance link (200 ms round trip, 30 MB/s), mounts it twice on a
fresh cache (read-ahead off, then on), plays it like a video player at 3 MB/s, and prints
the freezes each mount caused. It cleans up after itself.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDemo(ctx, cmd.OutOrStdout(), d)
		},
	}
	f := cmd.Flags()
	f.StringVar(&d.size, "size", "200MB", "size of the sample file")
	f.StringVar(&d.rate, "rate", "3MB/s", "bitrate to play at")
	f.StringVar(&d.limit, "limit", "0", "play only this many bytes (0: the whole file)")
	f.StringVar(&d.readAhead, "read-ahead", "64MiB", "read-ahead of the second mount")
	f.StringVar(&d.link, "link", "far", "emulated link: far, cloud, lan or loopback")
	f.BoolVar(&d.verbose, "verbose", false, "list every freeze")
	return cmd
}

type demoRow struct {
	name   string
	res    play.Result
	origin origin.Stats
	err    error
}

// runDemo serves a sample file behind an emulated link, plays it through one mount
// with read-ahead off and one with it on, and prints a table of both. Everything it
// starts or creates (origin, link, temporary directory) is gone when it returns.
func runDemo(ctx context.Context, out io.Writer, d demoFlags) error {
	size, rate, limit, ra, err := parseDemoFlags(d)
	if err != nil {
		return err
	}
	linkOpts, err := linkemu.Profile(d.link)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "playhead-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	const name = "sample.mp4"
	org := origin.New(origin.Options{Files: map[string]origin.File{"media/" + name: {Seed: 2026, Size: size}}})
	orgURL, err := org.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer org.Close()
	u, err := url.Parse(orgURL)
	if err != nil {
		return err
	}
	link, err := linkemu.New(u.Host, linkOpts)
	if err != nil {
		return err
	}
	addr, err := link.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer link.Close()
	fmt.Fprintf(out, "%s\norigin %s behind an emulated link (%s) at %s\n", versionString(), orgURL, linkOpts, addr)
	played := size
	if limit > 0 {
		played = min(limit, size)
	}
	fmt.Fprintf(out, "playing %s of a %s file at %s, cold, twice (about %v each)\n\n",
		units.FormatBytes(played), units.FormatBytes(size), d.rate, time.Duration(float64(played)/float64(rate)*float64(time.Second)).Round(time.Second))

	rows, err := demoMounts(ctx, out, d.verbose, org, "http://"+addr+"/media/", tmp, name, ra, play.Options{Rate: rate, Limit: limit})
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	printDemoTable(out, rows)
	for _, r := range rows {
		if r.err != nil {
			return r.err
		}
	}
	return nil
}

// parseDemoFlags parses and checks the demo's size, rate, limit and read-ahead flags.
func parseDemoFlags(d demoFlags) (size, rate, limit, ra int64, err error) {
	size, err = units.ParseBytes(d.size)
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("bad --size: %w", err)
	}
	rate, err = units.ParseRate(d.rate)
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("bad --rate: %w", err)
	}
	limit, err = units.ParseBytes(d.limit)
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("bad --limit: %w", err)
	}
	ra, err = units.ParseBytes(d.readAhead)
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("bad --read-ahead: %w", err)
	}
	if err := checkDemoFlags(d, size, rate, ra); err != nil {
		return 0, 0, 0, 0, err
	}
	return size, rate, limit, ra, nil
}

// demoMounts plays name from srcURL through two fresh mounts under tmp, read-ahead off
// and then ra, and returns a row for each, a failed play included (its row has the
// error). The origin's stats are reset before each, so a row's are its mount's alone.
// verbose lists each freeze. Only ctx ending is an error: it is returned right after
// the mount it ended during, with no rows, so no table is printed.
func demoMounts(ctx context.Context, out io.Writer, verbose bool, org *origin.Server, srcURL, tmp, name string, ra int64, po play.Options) ([]demoRow, error) {
	var rows []demoRow
	for i, mode := range []struct {
		name string
		ra   int64
	}{{"read-ahead off", 0}, {"read-ahead " + units.FormatBytes(ra), ra}} {
		fmt.Fprintf(out, "mount %d: %s ... ", i+1, mode.name)
		org.ResetStats()
		res, err := demoPlay(ctx, srcURL, filepath.Join(tmp, fmt.Sprint(i)), name, mode.ra, po)
		if err != nil {
			fmt.Fprintln(out, "failed:", err)
		} else {
			fmt.Fprintf(out, "%d freezes\n", res.Freezes)
			if verbose {
				printDemoFreezes(out, res)
			}
		}
		rows = append(rows, demoRow{name: mode.name, res: res, origin: org.Stats(), err: err})
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return rows, nil
}

// printDemoFreezes lists each freeze of res (--verbose).
func printDemoFreezes(out io.Writer, res play.Result) {
	for _, smp := range res.Samples {
		if smp.Freeze {
			fmt.Fprintf(out, "  freeze at offset %s: %v late (read took %v)\n", units.FormatBytes(smp.Off), smp.Late.Round(time.Millisecond), smp.Latency.Round(time.Millisecond))
		}
	}
}

// printDemoTable prints one line per mount: its figures, or its error.
func printDemoTable(out io.Writer, rows []demoRow) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mount\tstartup\tfreezes\tfrozen total\tworst stall\tp99 read\torigin MB\t")
	for _, r := range rows {
		if r.err != nil {
			fmt.Fprintf(tw, "%s\terror: %v\t\t\t\t\t\t\n", r.name, r.err)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.2fs\t%d\t%.2fs\t%.2fs\t%.0fms\t%.1f\t\n", r.name, r.res.Startup.Seconds(), r.res.Freezes,
			r.res.FrozenTotal.Seconds(), r.res.WorstStall.Seconds(), float64(r.res.ReadP99.Microseconds())/1000,
			float64(r.origin.BytesWritten)/1e6)
	}
	tw.Flush()
}

// demoPlay mounts srcURL on a fresh cache and mountpoint under dir, plays name, and
// unmounts.
func demoPlay(ctx context.Context, srcURL, dir, name string, readAhead int64, po play.Options) (play.Result, error) {
	src, err := sources.Builtin.Open(srcURL, sources.Options{})
	if err != nil {
		return play.Result{}, err
	}
	if err := sources.Probe(ctx, src); err != nil {
		return play.Result{}, err
	}
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = filepath.Join(dir, "cache")
	opts.ReadAhead.MaxWindow = readAhead
	opts.ReadAhead.InitialWindow = min(opts.ReadAhead.InitialWindow, max(readAhead, opts.Cache.BlockSize))
	opts.Logger = demoLogger
	fsys, err := vfs.New(src, opts)
	if err != nil {
		return play.Result{}, err
	}
	defer fsys.Close()
	mnt := filepath.Join(dir, "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return play.Result{}, err
	}
	server, err := fusefs.Mount(fsys, mnt, fusefs.MountOptions{})
	if err != nil {
		return play.Result{}, err
	}
	defer fusefs.Stop(server, mnt, demoLogger)
	return play.PlayFile(ctx, filepath.Join(mnt, name), po)
}
