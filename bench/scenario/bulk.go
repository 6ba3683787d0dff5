package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync/atomic"
	"time"

	"github.com/playhead/playhead/origin"
)

// bulkCase is a copy: one thread reading a file sequentially BulkRead bytes at a time as
// fast as it can, like cat. The figures are the cold read's; the same read again on the
// same mount, without dropping caches, is the cached throughput.
func bulkCase(s Sizes) Case {
	p := mediaName("bulk", 0)
	files := map[string]origin.File{p: newFile(p, s.BulkFile)}
	return Case{
		Scenario:  "bulk",
		Name:      "bulk " + sizeLabel(s.BulkFile),
		Files:     files,
		ReadyFile: p,
		Run: func(ctx context.Context, env Env) (Figures, error) {
			fsys, err := env.Mount(ctx)
			if err != nil {
				return nil, err
			}
			cold, err := readSequential(ctx, fsys, p, files[p], s.BulkRead)
			if err != nil {
				return nil, fmt.Errorf("cold read: %w", err)
			}
			reads := make([]Read, len(cold.lat))
			for i := range cold.lat {
				reads[i] = Read{At: cold.at[i].Seconds(), Latency: cold.lat[i].Seconds()}
			}
			record(env, reads)
			f := Figures{
				FigStartup:    cold.lat[0].Seconds(),
				FigReadP99:    percentile(cold.lat, 0.99).Seconds(),
				FigBytesRead:  float64(cold.bytes),
				FigThroughput: float64(cold.bytes) / cold.elapsed.Seconds(),
			}
			if _, uncached := fsys.(Uncached); uncached {
				return f, nil
			}
			cached, err := readSequential(ctx, fsys, p, files[p], s.BulkRead)
			if err != nil {
				return nil, fmt.Errorf("cached read: %w", err)
			}
			f[FigCachedThroughput] = float64(cached.bytes) / cached.elapsed.Seconds()
			return f, nil
		},
	}
}

// seqResult is one sequential read of a whole file.
type seqResult struct {
	bytes   int64
	elapsed time.Duration   // first read issued to last read returned
	lat     []time.Duration // every read's latency
	at      []time.Duration // every read's completion, since the first was issued
}

// bulkBuffers is how many read buffers the reader and the checker pass between them: two
// would do if both ran at a steady pace; four absorb a slow check without stalling reads.
const bulkBuffers = 4

// readSequential reads the origin path p of fsys from start to end with read(2) calls
// of readSize bytes, and checks every byte on a second goroutine so that the time
// measured is the filesystem's, not the checker's.
func readSequential(ctx context.Context, fsys fs.FS, p string, f origin.File, readSize int64) (seqResult, error) {
	var res seqResult
	fh, err := fsys.Open(p)
	if err != nil {
		return res, err
	}
	defer fh.Close()
	type piece struct {
		buf []byte
		off int64
	}
	free := make(chan []byte, bulkBuffers)
	for range bulkBuffers {
		free <- make([]byte, readSize)
	}
	full := make(chan piece, bulkBuffers)
	checked := make(chan error, 1)
	var failed atomic.Bool
	go func() {
		var first error
		for pc := range full {
			if first == nil {
				if first = check(p, f, pc.buf, pc.off); first != nil {
					failed.Store(true)
				}
			}
			free <- pc.buf[:cap(pc.buf)]
		}
		checked <- first
	}()
	finish := func(err error) (seqResult, error) {
		close(full)
		if cerr := <-checked; cerr != nil {
			return res, cerr
		}
		return res, err
	}

	start := time.Now()
	for !failed.Load() {
		if err := ctx.Err(); err != nil {
			return finish(err)
		}
		buf := <-free
		t0 := time.Now()
		n, err := fh.Read(buf)
		res.lat = append(res.lat, time.Since(t0))
		res.at = append(res.at, time.Since(start))
		if n > 0 {
			full <- piece{buf[:n], res.bytes}
			res.bytes += int64(n)
		} else {
			free <- buf
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return finish(fmt.Errorf("%s: read at %d: %w", p, res.bytes, err))
		}
	}
	res.elapsed = time.Since(start)
	if _, err := finish(nil); err != nil {
		return res, err
	}
	if res.bytes != f.Size {
		return res, &MismatchError{Path: p, Err: fmt.Errorf("read %d bytes to EOF, origin has %d", res.bytes, f.Size)}
	}
	return res, nil
}

// sizeLabel prints a size as the spec names it: "1GiB", "100MB".
func sizeLabel(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dMB", n/1_000_000)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dB", n)
}
