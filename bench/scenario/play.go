package scenario

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"time"

	"github.com/playhead/playhead/bench/play"
	"github.com/playhead/playhead/origin"
)

// playCases are the play scenario: one file played from the start at each bitrate, each
// rate on its own fresh mount. Freezes are counted after the first read (whose latency
// is the startup), as bench/play does.
func playCases(s Sizes) []Case {
	p := mediaName("play", 0)
	files := map[string]origin.File{p: newFile(p, s.PlayFile)}
	var cases []Case
	for _, rate := range s.PlayRates {
		cases = append(cases, Case{
			Scenario:  "play",
			Name:      "play " + rateLabel(rate),
			Files:     files,
			ReadyFile: p,
			Run: func(ctx context.Context, env Env) (Figures, error) {
				fsys, err := env.Mount(ctx)
				if err != nil {
					return nil, err
				}
				res, err := playPath(ctx, fsys, p, files[p], play.Options{Rate: rate})
				if err != nil {
					return nil, err
				}
				record(env, playReads(res, 0, 0))
				return playFigures(res), nil
			},
		})
	}
	return cases
}

// rewatchCase plays a file, waits RewatchPause, unmounts, mounts again on the same cache
// and plays it again. The figures (origin bytes above all, goal 0) are the second play's.
func rewatchCase(s Sizes) Case {
	p := mediaName("rewatch", 0)
	files := map[string]origin.File{p: newFile(p, s.RewatchFile)}
	return Case{
		Scenario:  "rewatch",
		Name:      "rewatch " + rateLabel(s.RewatchRate),
		Files:     files,
		ReadyFile: p,
		Run: func(ctx context.Context, env Env) (Figures, error) {
			opts := play.Options{Rate: s.RewatchRate}
			fsys, err := env.Mount(ctx)
			if err != nil {
				return nil, err
			}
			if _, err := playPath(ctx, fsys, p, files[p], opts); err != nil {
				return nil, fmt.Errorf("first play: %w", err)
			}
			if err := (play.RealClock()).Sleep(ctx, s.RewatchPause); err != nil {
				return nil, err
			}
			if err := env.Unmount(); err != nil {
				return nil, fmt.Errorf("unmount after the first play: %w", err)
			}
			if fsys, err = env.Mount(ctx); err != nil {
				return nil, fmt.Errorf("second mount: %w", err)
			}
			res, err := playPath(ctx, fsys, p, files[p], opts)
			if err != nil {
				return nil, fmt.Errorf("second play: %w", err)
			}
			record(env, playReads(res, 0, 0))
			return playFigures(res), nil
		},
	}
}

// streamsCase plays set.Players different files of size bytes at once on one mount.
// Freezes and frozen time are summed over the streams, the worst stall is the worst of
// any, startup is the median stream's (the slowest one's is an extra figure).
func streamsCase(size int64, set StreamSet) Case {
	files := map[string]origin.File{}
	var paths []string
	for i := range set.Players {
		p := mediaName("streams", i)
		files[p] = newFile(p, size)
		paths = append(paths, p)
	}
	return Case{
		Scenario:  "streams",
		Name:      fmt.Sprintf("streams %d x %s", set.Players, rateLabel(set.Rate)),
		Files:     files,
		ReadyFile: paths[0],
		Run: func(ctx context.Context, env Env) (Figures, error) {
			fsys, err := env.Mount(ctx)
			if err != nil {
				return nil, err
			}
			results := make([]play.Result, len(paths))
			began := make([]time.Duration, len(paths)) // each play's start, since start
			errs := make([]error, len(paths))
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			start := time.Now()
			var wg sync.WaitGroup
			for i, p := range paths {
				wg.Go(func() {
					began[i] = time.Since(start)
					results[i], errs[i] = playPath(ctx, fsys, p, files[p], play.Options{Rate: set.Rate})
					if errs[i] != nil {
						cancel() // one broken stream ends the trial; no need to play the rest
					}
				})
			}
			wg.Wait()
			wall := time.Since(start)
			if err := rootCause(errs); err != nil {
				return nil, err
			}
			f := mergePlays(results, wall)
			var startups []time.Duration
			var reads []Read
			for i, r := range results {
				startups = append(startups, r.Startup)
				reads = append(reads, playReads(r, began[i], i+1)...)
			}
			record(env, reads)
			f[FigStreamStartupMax] = slices.Max(startups).Seconds()
			return f, nil
		},
	}
}

// rootCause picks the error to report among concurrent readers' errors: a data
// mismatch first, then one that is not the cancellation the first failure caused.
func rootCause(errs []error) error {
	var first error
	for _, err := range errs {
		switch {
		case err == nil:
		case IsMismatch(err):
			return err
		case first == nil || errors.Is(first, context.Canceled):
			first = err
		}
	}
	return first
}

// playPath opens the origin path p of fsys, checks its size and plays it with every
// read checked.
func playPath(ctx context.Context, fsys fs.FS, p string, f origin.File, opts play.Options) (play.Result, error) {
	vf, err := openVerified(fsys, p, f)
	if err != nil {
		return play.Result{}, err
	}
	defer vf.Close()
	if err := vf.wantSize(); err != nil {
		return play.Result{}, err
	}
	res, err := play.Run(ctx, vf, f.Size, opts)
	if err != nil {
		return res, fmt.Errorf("play %s: %w", p, err)
	}
	if want := playLength(f.Size, opts); res.Bytes != want {
		return res, fmt.Errorf("play %s: played %d bytes, want %d", p, res.Bytes, want)
	}
	return res, nil
}

// playLength is how many bytes play.Run should play of a file of size bytes.
func playLength(size int64, o play.Options) int64 {
	end := size
	if o.Limit > 0 && o.Start+o.Limit < end {
		end = o.Start + o.Limit
	}
	return end - o.Start
}

// playFigures turns one play into figures.
func playFigures(r play.Result) Figures {
	f := Figures{
		FigStartup:     r.Startup.Seconds(),
		FigFreezes:     float64(r.Freezes),
		FigFrozenTotal: r.FrozenTotal.Seconds(),
		FigWorstStall:  r.WorstStall.Seconds(),
		FigReadP99:     r.ReadP99.Seconds(),
		FigBytesRead:   float64(r.Bytes),
	}
	if r.Elapsed > 0 {
		f[FigThroughput] = float64(r.Bytes) / r.Elapsed.Seconds()
	}
	return f
}

// mergePlays sums plays that ran at once (streams) or one after another (seek): freezes
// and frozen time add up, the worst stall is the worst, p99 is over every read, and
// throughput is all bytes over wall time. Startup is the median play's.
func mergePlays(rs []play.Result, wall time.Duration) Figures {
	var lat, startups []time.Duration
	f := Figures{FigFreezes: 0, FigFrozenTotal: 0, FigWorstStall: 0}
	var bytes int64
	for _, r := range rs {
		f[FigFreezes] += float64(r.Freezes)
		f[FigFrozenTotal] += r.FrozenTotal.Seconds()
		f[FigWorstStall] = max(f[FigWorstStall], r.WorstStall.Seconds())
		bytes += r.Bytes
		startups = append(startups, r.Startup)
		for _, s := range r.Samples {
			lat = append(lat, s.Latency)
		}
	}
	f[FigBytesRead] = float64(bytes)
	if wall > 0 {
		f[FigThroughput] = float64(bytes) / wall.Seconds()
	}
	if len(lat) > 0 {
		f[FigReadP99] = percentile(lat, 0.99).Seconds()
	}
	if len(startups) > 0 {
		f[FigStartup] = percentile(startups, 0.5).Seconds()
	}
	return f
}

// percentile returns the nearest-rank p-quantile of ds, which is not empty.
func percentile(ds []time.Duration, p float64) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	i := int(float64(len(ds))*p+0.999999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}
