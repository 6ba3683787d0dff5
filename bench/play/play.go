// Package play is a paced reader that behaves like a video player and counts freezes, so
// any filesystem (a playhead mount, another tool's mount, a local file) can be judged by
// what a viewer would see rather than by MB/s.
//
// # Model
//
// The first read's completion is the startup time; the playback clock starts then. Chunk
// i (Chunk bytes from Start) is due at start + i*Chunk/Rate. The player keeps Ahead
// chunks buffered: it issues the read for chunk i when chunk i-Ahead is due, not earlier,
// and reads sequentially with one read in flight, as a demuxer does. A read that
// completes more than FreezeThreshold after its chunk was due is a freeze; the timeline
// then shifts by the lateness (the player rebuffers), so one slow read is one freeze, not
// a cascade of late chunks behind it.
//
// # Traps
//
//   - Lateness under the threshold does not shift the timeline: a source a little too
//     slow for the bitrate accumulates lateness until it freezes, as it would on screen.
//   - Issuing reads no earlier than due means the filesystem, not the player, must hide
//     latency: that is the point. Raise Ahead to model a player's own buffer.
//   - The page cache serves repeated runs over a local file or a mount with kernel
//     caching; drop caches or use fresh files when that matters.
//   - Times come from Options.Clock; inside a testing/synctest bubble the real clock is
//     virtual and a long play takes no wall time.
package play

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"
)

// Run plays size bytes of r (the file's size; reads stop early at io.EOF) and reports what
// a viewer would have seen. r is read sequentially from one goroutine, one read at a time.
// If ctx ends or a read fails, Run returns what was played so far with the error.
func Run(ctx context.Context, r io.ReaderAt, size int64, opts Options) (Result, error) {
	if err := opts.Validate(); err != nil {
		return Result{}, err
	}
	o := opts.withDefaults()
	end := size
	if o.Limit > 0 && o.Start+o.Limit < end {
		end = o.Start + o.Limit
	}
	if o.Start >= end {
		return Result{}, fmt.Errorf("play: nothing to play: start %d, end %d", o.Start, end)
	}

	p := player{o: o, clock: o.Clock, buf: make([]byte, o.Chunk)}
	err := p.play(ctx, r, end)
	res := p.result()
	return res, err
}

// PlayFile opens path and plays it with Run.
func PlayFile(ctx context.Context, path string, opts Options) (Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return Result{}, fmt.Errorf("play: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Result{}, fmt.Errorf("play: %w", err)
	}
	res, err := Run(ctx, f, st.Size(), opts)
	if err != nil {
		return res, fmt.Errorf("play %s: %w", path, err)
	}
	return res, nil
}

// player is the state of one Run.
type player struct {
	o     Options
	clock Clock
	buf   []byte

	began     time.Time     // Run started: the first read is issued
	playStart time.Time     // the first read completed: chunk 0 is due
	shift     time.Duration // rebuffering so far: every due time moves by it
	samples   []Sample
	freezes   int
	frozen    time.Duration
	worst     time.Duration
	bytes     int64
}

// due returns when chunk i is due on the current (shifted) timeline.
func (p *player) due(i int64) time.Time {
	return p.playStart.Add(p.shift + bytesToDuration(i*p.o.Chunk, p.o.Rate))
}

func (p *player) play(ctx context.Context, r io.ReaderAt, end int64) error {
	p.began = p.clock.Now()
	for i, off := int64(0), p.o.Start; off < end; i, off = i+1, off+p.o.Chunk {
		if i > 0 {
			// Keep Ahead chunks buffered: chunk i is wanted once chunk i-Ahead plays.
			// For the first Ahead chunks that moment has passed (it is playStart).
			if j := i - int64(p.o.Ahead); j > 0 {
				if err := p.clock.Sleep(ctx, p.due(j).Sub(p.clock.Now())); err != nil {
					return err
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}

		n := min(p.o.Chunk, end-off)
		issued := p.clock.Now()
		got, err := r.ReadAt(p.buf[:n], off)
		done := p.clock.Now()
		if err != nil && !(errors.Is(err, io.EOF) && got > 0) {
			if errors.Is(err, io.EOF) { // the file is shorter than size
				return nil
			}
			return fmt.Errorf("read %d bytes at offset %d: %w", n, off, err)
		}

		s := Sample{Off: off, At: done.Sub(p.began), Latency: done.Sub(issued)}
		if i == 0 {
			p.playStart = done
		} else {
			s.Late = done.Sub(p.due(i))
			if s.Late > p.o.FreezeThreshold {
				s.Freeze = true
				p.freezes++
				p.frozen += s.Late
				p.worst = max(p.worst, s.Late)
				p.shift += s.Late // rebuffer: the rest of the film plays that much later
			}
		}
		p.samples = append(p.samples, s)
		p.bytes += int64(got)
		if int64(got) < n { // short read with io.EOF: the file ended early
			return nil
		}
	}
	return nil
}

func (p *player) result() Result {
	res := Result{
		Freezes:     p.freezes,
		FrozenTotal: p.frozen,
		WorstStall:  p.worst,
		Bytes:       p.bytes,
		Samples:     p.samples,
	}
	if len(p.samples) == 0 {
		return res
	}
	res.Startup = p.samples[0].Latency
	res.Elapsed = p.samples[len(p.samples)-1].At
	lat := make([]time.Duration, len(p.samples))
	for i, s := range p.samples {
		lat[i] = s.Latency
	}
	slices.Sort(lat)
	res.ReadP50 = percentile(lat, 0.50)
	res.ReadP99 = percentile(lat, 0.99)
	return res
}

// percentile returns the nearest-rank p-quantile of sorted, which is not empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(float64(len(sorted))*p)) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// bytesToDuration is how long n bytes play at rate bytes/s. It goes through float64:
// n*1e9 overflows int64 past 9 GB.
func bytesToDuration(n, rate int64) time.Duration {
	return time.Duration(float64(n) / float64(rate) * float64(time.Second))
}
