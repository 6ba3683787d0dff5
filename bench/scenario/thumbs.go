package scenario

import (
	"context"
	"fmt"
	"io/fs"
	"time"

	"github.com/playhead/playhead/origin"
)

// thumbsCase is a media scanner building its library: for each of ThumbFiles files it
// stats the file, opens it, reads ThumbProbe bytes at the start (the container header)
// and at the end (an index such as MP4's moov), and closes it. A good filesystem fetches
// little more than the probes: read-ahead must not start on them.
func thumbsCase(s Sizes) Case {
	files := map[string]origin.File{}
	var paths []string
	for i := range s.ThumbFiles {
		p := mediaName("thumbs", i)
		files[p] = newFile(p, s.ThumbFile)
		paths = append(paths, p)
	}
	return Case{
		Scenario:  "thumbs",
		Name:      fmt.Sprintf("thumbs %d files", s.ThumbFiles),
		Files:     files,
		ReadyFile: paths[0],
		Run: func(ctx context.Context, env Env) (Figures, error) {
			fsys, err := env.Mount(ctx)
			if err != nil {
				return nil, err
			}
			var perFile, reads []time.Duration
			var timeline []Read
			var bytes int64
			buf := make([]byte, s.ThumbProbe)
			start := time.Now()
			for _, p := range paths {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				f := files[p]
				t0 := time.Now()
				st, err := fs.Stat(fsys, p)
				if err != nil {
					return nil, err
				}
				if st.Size() != f.Size {
					return nil, &MismatchError{Path: p, Err: fmt.Errorf("size %d, origin has %d", st.Size(), f.Size)}
				}
				vf, err := openVerified(fsys, p, f)
				if err != nil {
					return nil, err
				}
				for _, off := range []int64{0, max(f.Size-s.ThumbProbe, 0)} {
					r0 := time.Now()
					n, err := vf.ReadAt(buf[:min(s.ThumbProbe, f.Size)], off)
					lat := time.Since(r0)
					reads = append(reads, lat)
					timeline = append(timeline, Read{At: time.Since(start).Seconds(), Latency: lat.Seconds()})
					bytes += int64(n)
					if err != nil {
						vf.Close()
						return nil, fmt.Errorf("%s: read at %d: %w", p, off, err)
					}
				}
				if err := vf.Close(); err != nil {
					return nil, err
				}
				perFile = append(perFile, time.Since(t0))
			}
			wall := time.Since(start)
			record(env, timeline)
			return Figures{
				// Startup is the first file's time, which includes listing the directory.
				FigStartup:    perFile[0].Seconds(),
				FigReadP99:    percentile(reads, 0.99).Seconds(),
				FigBytesRead:  float64(bytes),
				FigThroughput: float64(bytes) / wall.Seconds(),
				FigFiles:      float64(len(paths)),
				FigFileMedian: percentile(perFile, 0.5).Seconds(),
				FigFileMax:    percentile(perFile, 1).Seconds(),
			}, nil
		},
	}
}
