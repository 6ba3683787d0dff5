package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/playhead/playhead/bench/play"
	"github.com/playhead/playhead/origin"
)

// seekCase is a viewer jumping around: Seeks seeks to random offsets (fixed seed, so
// every trial and every build seeks to the same places) in one file, SeekPlay bytes
// played after each, through one open handle as a player keeps. The first 256 KiB read
// after a seek is its time to first 256 KiB (the play's startup); freezes are counted
// after it. Startup is the median of those times; the max is an extra figure.
func seekCase(s Sizes) Case {
	p := mediaName("seek", 0)
	files := map[string]origin.File{p: newFile(p, s.SeekFile)}
	return Case{
		Scenario:  "seek",
		Name:      fmt.Sprintf("seek %d x %s", s.Seeks, rateLabel(s.SeekRate)),
		Files:     files,
		ReadyFile: p,
		Run: func(ctx context.Context, env Env) (Figures, error) {
			vf, err := mountAndOpen(ctx, env, p, files[p])
			if err != nil {
				return nil, err
			}
			defer vf.Close()
			rng := rand.New(rand.NewPCG(s.SeekSeed, uint64(s.SeekFile)))
			var results []play.Result
			var ttf []time.Duration
			var reads []Read
			start := time.Now()
			for i := range s.Seeks {
				off := rng.Int64N(s.SeekFile - s.SeekPlay)
				opts := play.Options{Rate: s.SeekRate, Start: off, Limit: s.SeekPlay}
				began := time.Since(start)
				res, err := play.Run(ctx, vf, s.SeekFile, opts)
				if err != nil {
					return nil, fmt.Errorf("seek %d to %d: %w", i, off, err)
				}
				results = append(results, res)
				ttf = append(ttf, res.Startup)
				reads = append(reads, playReads(res, began, 0)...)
			}
			record(env, reads)
			f := mergePlays(results, time.Since(start))
			f[FigSeekTTFMedian] = percentile(ttf, 0.5).Seconds()
			f[FigSeekTTFMax] = percentile(ttf, 1).Seconds()
			return f, nil
		},
	}
}
