package vfs_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

// The random-read model test: rapid draws a file, a block size, read-ahead and fetch
// settings, a cache size, an origin's latency and fault rates, and a sequence of reads,
// seeks, concurrent readers, reopens and restarts; every byte any read returns is checked
// against the pattern file (a byte is a function of its offset), and every count and
// error against io.ReaderAt's contract. Transient origin faults must be invisible: the
// fetcher retries them.
//
// It runs modelChecks cases by default (a few seconds) and modelLongChecks with
// PLAYHEAD_LONG=1; -rapid.checks (or RAPID_CHECKS) overrides both. A failure shrinks to
// a minimal case, which rapid saves under testdata/rapid and replays on every run until
// it is fixed; keep it as a named test (see TestModelRegression*) once understood.

const (
	modelChecks     = 40
	modelLongChecks = 1500
	// modelStallTimeout is how long a silent body is waited for: each injected hang
	// costs this much.
	modelStallTimeout = 100 * time.Millisecond
)

// longRun reports whether the long versions of the reliability tests were asked for.
func longRun() bool { return os.Getenv("PLAYHEAD_LONG") == "1" }

// figure prints a reliability figure line for t, "RELIABILITY <test name>: <text>",
// which scripts/reliability.sh collects into docs/RELIABILITY.md (see
// integration/figures_test.go).
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("RELIABILITY %s: %s", t.Name(), fmt.Sprintf(format, args...))
}

// setRapidChecks sets rapid's case count unless the command line or RAPID_CHECKS did.
func setRapidChecks(t *testing.T, short, long int) {
	t.Helper()
	explicit := os.Getenv("RAPID_CHECKS") != ""
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
	if explicit {
		return
	}
	n := short
	if longRun() {
		n = long
	}
	f := flag.Lookup("rapid.checks")
	old := f.Value.String()
	if err := f.Value.Set(fmt.Sprint(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Value.Set(old) })
}

// modelTally counts what the model checked, for the figure the test prints.
type modelTally struct {
	cases, reads, bytes, opens, restarts, faults, replaces, changed atomic.Int64
}

func TestModelRandomReads(t *testing.T) {
	setRapidChecks(t, modelChecks, modelLongChecks)
	base := t.TempDir()
	var tally modelTally
	rapid.Check(t, func(rt *rapid.T) { runModelCase(rt, base, &tally) })
	settleDir(t, base) // late cache writes of the last case (see settleDir)
	figure(t, "%d cases, %d reads, %d bytes verified, %d opens, %d restarts, %d origin faults injected, %d replaces at the origin (%d reads of replaced versions failed with ErrChanged), 0 mismatches",
		tally.cases.Load(), tally.reads.Load(), tally.bytes.Load(), tally.opens.Load(), tally.restarts.Load(), tally.faults.Load(),
		tally.replaces.Load(), tally.changed.Load())
}

// modelCase is one drawn configuration; runModelCase draws and runs it.
type modelCase struct {
	size int64
	seed uint64
	opts vfs.Options
	rtt  time.Duration
	plan memsrc.FaultPlan
	// replaces: the origin may replace the file during the case.
	replaces bool
}

func drawModelCase(t *rapid.T, dir string) modelCase {
	bs := rapid.SampledFrom([]int64{4 << 10, 8 << 10, 16 << 10, 64 << 10}).Draw(t, "blockSize")
	var size int64
	if rapid.Bool().Draw(t, "sizeNearBlock") {
		// Sizes at and around a block boundary, where the last block is full, one byte, or
		// one byte short.
		size = max(0, rapid.Int64Range(0, 40).Draw(t, "sizeBlocks")*bs+rapid.Int64Range(-1, 1).Draw(t, "sizeDelta"))
	} else {
		size = rapid.Int64Range(0, 3<<20).Draw(t, "size")
	}
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = dir
	opts.Cache.BlockSize = bs
	opts.Cache.MaxBytes = 1 << 30
	if rapid.Bool().Draw(t, "smallCache") {
		// A few blocks: eviction runs while reads and read-ahead are in flight.
		opts.Cache.MaxBytes = rapid.Int64Range(4, 64).Draw(t, "cacheBlocks") * bs
	}
	ra := &opts.ReadAhead
	ra.SeekFetch = rapid.Int64Range(0, 1<<20).Draw(t, "seekFetch")
	ra.Trigger = rapid.Int64Range(0, 512<<10).Draw(t, "trigger")
	ra.MaxWindow = 0
	if !rapid.Bool().Draw(t, "readAheadOff") {
		ra.InitialWindow = rapid.Int64Range(bs, 1<<20).Draw(t, "initialWindow")
		ra.MaxWindow = rapid.Int64Range(ra.InitialWindow, 4<<20).Draw(t, "maxWindow")
	}
	ra.GrowEvery = rapid.Int64Range(1, 3).Draw(t, "growEvery")
	ra.Slack = rapid.Int64Range(0, 2<<20).Draw(t, "slack")
	ra.MaxRuns = rapid.IntRange(1, 4).Draw(t, "raRuns")
	fo := &opts.Fetch
	fo.ReadThrough = rapid.Int64Range(0, 1<<20).Draw(t, "readThrough")
	fo.MaxRangeStreams = rapid.IntRange(1, 8).Draw(t, "maxStreams")
	fo.MaxParallel = rapid.IntRange(1, fo.MaxRangeStreams).Draw(t, "maxParallel")
	fo.PartSize = rapid.Int64Range(1, 16).Draw(t, "partBlocks") * bs
	fo.OpenEndedWindow = rapid.Int64Range(1, 64).Draw(t, "openEndedBlocks") * bs
	// Transient faults are retried at once and invisible; a read may take at most
	// IOTimeout, far longer than any case needs.
	fo.IOTimeout = 20 * time.Second
	fo.StallTimeout = modelStallTimeout
	fo.IdleClose = 50 * time.Millisecond
	fo.RetryMin = time.Millisecond
	fo.RetryMax = 5 * time.Millisecond
	opts.ListTTL = time.Hour
	c := modelCase{size: size, seed: rapid.Uint64().Draw(t, "seed"), opts: opts, replaces: rapid.Bool().Draw(t, "replaces"),
		rtt: rapid.SampledFrom([]time.Duration{0, 100 * time.Microsecond, time.Millisecond}).Draw(t, "rtt")}
	if rapid.Bool().Draw(t, "faulty") {
		c.plan = memsrc.FaultPlan{
			FailRate: rapid.SampledFrom([]float64{0, 0.05, 0.2, 0.5}).Draw(t, "failRate"),
			CutRate:  rapid.SampledFrom([]float64{0, 0.05, 0.2, 0.5}).Draw(t, "cutRate"),
			Seed:     rapid.Int64().Draw(t, "faultSeed"),
		}
		// Now and then a body that goes silent, or fails, at a planned request: the
		// fetcher must give up on it after StallTimeout and ask again.
		for range rapid.IntRange(0, 2).Draw(t, "plannedFaults") {
			c.plan.Faults = append(c.plan.Faults, memsrc.Fault{
				N:    rapid.IntRange(1, 20).Draw(t, "faultN"),
				Kind: rapid.SampledFrom([]memsrc.FaultKind{memsrc.Hang, memsrc.ReadError, memsrc.FailOpen}).Draw(t, "faultKind"),
				At:   rapid.Int64Range(0, 4*bs).Draw(t, "faultAt"),
			})
		}
	}
	return c
}

// countingFaults counts the faults the wrapper injected: failed opens and bodies cut
// short, failed or hung.
type countingFaults struct {
	source.Source
	n *atomic.Int64
}

func (c countingFaults) OpenRange(ctx context.Context, p string, r source.Range, want source.Version) (source.Body, error) {
	b, err := c.Source.OpenRange(ctx, p, r, want)
	if err != nil {
		if errors.Is(err, memsrc.ErrInjected) {
			c.n.Add(1)
		}
		return nil, err
	}
	return &countingBody{Body: b, n: c.n}, nil
}

type countingBody struct {
	source.Body
	n      *atomic.Int64
	struck bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	k, err := b.Body.Read(p)
	// memsrc bodies fail only when a fault (a cut, an error, a hang the fetcher gave up
	// on) makes them.
	if !b.struck && err != nil && err != io.EOF {
		b.struck = true
		b.n.Add(1)
	}
	return k, err
}

func runModelCase(t *rapid.T, base string, tally *modelTally) {
	dir, err := os.MkdirTemp(base, "case")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	c := drawModelCase(t, dir)
	tally.cases.Add(1)

	mem := memsrc.New()
	mem.AddPattern("f.bin", c.seed, c.size)
	var src source.Source = mem
	if c.rtt > 0 {
		src = memsrc.WithLatency(src, c.rtt)
	}
	if c.plan.FailRate > 0 || c.plan.CutRate > 0 || len(c.plan.Faults) > 0 {
		src = countingFaults{memsrc.WithFaults(src, c.plan), &tally.faults}
	}
	fsys, err := vfs.New(src, c.opts)
	if err != nil {
		t.Fatalf("vfs.New: %v", err)
	}
	cur, _ := mem.Version("f.bin")
	m := &model{t: t, c: c, mem: mem, fsys: fsys, tally: tally, seeds: map[time.Time]uint64{cur.ModTime: c.seed}, cur: cur}
	defer func() { m.closeAll() }()
	m.open()
	t.Repeat(map[string]func(*rapid.T){
		"readAt": func(t *rapid.T) {
			h := m.pick(t)
			off, n := m.drawRange(t, h)
			m.check(fmt.Sprintf("handle %d ReadAt(%d, %d)", h, n, off), h, off, n, func(p []byte) (int, error) {
				return m.files[h].ReadAt(p, off)
			})
		},
		"seekRead": func(t *rapid.T) {
			h := m.pick(t)
			off, n := m.drawRange(t, h)
			whence := rapid.SampledFrom([]int{io.SeekStart, io.SeekCurrent, io.SeekEnd}).Draw(t, "whence")
			rel := off
			switch whence {
			case io.SeekCurrent:
				rel = off - m.pos[h]
			case io.SeekEnd:
				rel = off - m.files[h].Size()
			}
			if off < 0 {
				return
			}
			if got, err := m.files[h].Seek(rel, whence); err != nil || got != off {
				t.Fatalf("handle %d Seek(%d, %d) = %d, %v; want %d", h, rel, whence, got, err, off)
			}
			m.pos[h] = off
			m.check(fmt.Sprintf("handle %d Read(%d) at %d", h, n, off), h, off, n, func(p []byte) (int, error) {
				k, err := io.ReadFull(m.files[h], p)
				if err == io.ErrUnexpectedEOF {
					err = io.EOF // ReadFull's name for a short read at the end
				}
				return k, err
			})
			m.pos[h] += m.last
		},
		"sequential": func(t *rapid.T) {
			// A reader streaming through part of the file in chunks, as a player does:
			// what makes read-ahead engage and its window grow.
			h := m.pick(t)
			off := rapid.Int64Range(0, max(m.files[h].Size()-1, 0)).Draw(t, "from")
			chunk := rapid.IntRange(1, 256<<10).Draw(t, "chunk")
			count := rapid.IntRange(1, 24).Draw(t, "chunks")
			for i := range count {
				o := off + int64(i*chunk)
				m.check(fmt.Sprintf("handle %d sequential ReadAt(%d, %d)", h, chunk, o), h, o, chunk, func(p []byte) (int, error) {
					return m.files[h].ReadAt(p, o)
				})
			}
		},
		"concurrent": func(t *rapid.T) {
			// Several goroutines on one or several handles at once; each read is drawn
			// here (rapid.T is not for concurrent use) and checked in its goroutine.
			type job struct {
				h      int
				off    int64
				n      int
				stream bool
			}
			var jobs []job
			for range rapid.IntRange(2, 6).Draw(t, "readers") {
				h := m.pick(t)
				off, n := m.drawRange(t, h)
				jobs = append(jobs, job{h, off, n, rapid.Bool().Draw(t, "streaming")})
			}
			var wg sync.WaitGroup
			errs := make(chan error, len(jobs))
			for _, j := range jobs {
				wg.Go(func() {
					reads := 1
					if j.stream {
						reads = 8
					}
					for i := range reads {
						o := j.off + int64(i*j.n)
						p := make([]byte, j.n)
						k, err := m.files[j.h].ReadAt(p, o)
						if e := m.verify(j.h, o, j.n, p, k, err); e != nil {
							errs <- fmt.Errorf("concurrent reader on handle %d: ReadAt(%d, %d): %w", j.h, j.n, o, e)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		},
		"replace": func(t *rapid.T) {
			// The origin replaces the file: same size or another. Handles opened before
			// must keep giving old bytes or ErrChanged; opens after it (once the listing
			// is stale or dropped) the new version.
			if !c.replaces {
				return
			}
			size := m.cur.Size
			if rapid.Bool().Draw(t, "newSize") {
				size = rapid.Int64Range(0, 3<<20).Draw(t, "replaceSize")
			}
			seed := rapid.Uint64().Draw(t, "replaceSeed")
			m.mem.ReplacePattern("f.bin", seed, size)
			m.cur, _ = m.mem.Version("f.bin")
			m.seeds[m.cur.ModTime] = seed
			m.tally.replaces.Add(1)
		},
		"open": func(t *rapid.T) {
			if len(m.files) < 4 {
				m.open()
			}
		},
		"close": func(t *rapid.T) {
			if len(m.files) > 1 {
				h := m.pick(t)
				if err := m.files[h].Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				m.files = append(m.files[:h], m.files[h+1:]...)
				m.pos = append(m.pos[:h], m.pos[h+1:]...)
			}
		},
		"restart": func(t *rapid.T) {
			// Close everything and open the FS again on the same cache directory: the
			// next reads come from the blocks the last run left on disk.
			m.closeAll()
			fsys, err := vfs.New(src, c.opts)
			if err != nil {
				t.Fatalf("vfs.New after restart: %v", err)
			}
			m.fsys = fsys
			m.tally.restarts.Add(1)
			m.open()
		},
	})
}

// model is the state of one case: the FS and its open handles with their positions.
type model struct {
	t     *rapid.T
	c     modelCase
	mem   *memsrc.Source
	fsys  *vfs.FS
	files []*vfs.File
	pos   []int64 // Read/Seek position of each handle
	last  int64   // bytes the last check read
	tally *modelTally

	// seeds maps each version the origin has had (by ModTime, unique per memsrc
	// version) to its pattern seed; size is the origin's current size.
	seeds map[time.Time]uint64
	cur   source.Version
}

// seedOf is the pattern of the version handle h was opened at.
func (m *model) seedOf(h int) uint64 {
	seed, ok := m.seeds[m.files[h].Entry().Version.ModTime]
	if !ok {
		m.t.Fatalf("handle %d opened a version the origin never had: %v", h, m.files[h].Entry().Version)
	}
	return seed
}

func (m *model) open() {
	f, err := m.fsys.Open(context.Background(), "f.bin")
	if err != nil {
		m.t.Fatalf("Open: %v", err)
	}
	m.files = append(m.files, f)
	if _, known := m.seeds[f.Entry().Version.ModTime]; !known || f.Entry().Version.Size != f.Size() {
		m.t.Fatalf("Open: size %d version %v, origin has %v", f.Size(), f.Entry().Version, m.cur)
	}
	m.pos = append(m.pos, 0)
	m.tally.opens.Add(1)
}

func (m *model) closeAll() {
	for _, f := range m.files {
		f.Close()
	}
	m.files, m.pos = nil, nil
	if m.fsys != nil {
		m.fsys.Close()
		m.fsys = nil
	}
}

func (m *model) pick(t *rapid.T) int {
	return rapid.IntRange(0, len(m.files)-1).Draw(t, "handle")
}

// drawRange draws a read: anywhere in the file, often across a block boundary or the
// end, sometimes past it.
func (m *model) drawRange(t *rapid.T, h int) (int64, int) {
	bs := m.c.opts.Cache.BlockSize
	size := m.files[h].Size()
	var off int64
	switch rapid.IntRange(0, 3).Draw(t, "where") {
	case 0:
		off = rapid.Int64Range(0, size+bs).Draw(t, "off")
	case 1: // just before, at or after a block boundary
		off = max(0, rapid.Int64Range(0, size/bs+1).Draw(t, "block")*bs+rapid.Int64Range(-2, 2).Draw(t, "delta"))
	case 2: // near the end
		off = max(0, size-rapid.Int64Range(-2, 3*bs).Draw(t, "fromEnd"))
	default:
		off = rapid.Int64Range(0, max(size-1, 0)).Draw(t, "off")
	}
	n := rapid.IntRange(1, int(min(4*bs, 512<<10))).Draw(t, "len")
	return off, n
}

// check runs one read of n bytes at off and verifies it.
func (m *model) check(what string, h int, off int64, n int, read func([]byte) (int, error)) {
	p := make([]byte, n)
	k, err := read(p)
	if e := m.verify(h, off, n, p, k, err); e != nil {
		m.t.Fatalf("%s: %v", what, e)
	}
	m.last = int64(k)
}

// verify checks one read of handle h against the model: io.ReaderAt's count and error,
// and every byte against the pattern of the version h was opened at. A handle of a
// version the origin has replaced may instead fail with ErrChanged, after old bytes.
// Safe for concurrent use (it reads the model, which only the main goroutine changes).
func (m *model) verify(h int, off int64, n int, p []byte, k int, err error) error {
	m.tally.reads.Add(1)
	f := m.files[h]
	seed, size := m.seeds[f.Entry().Version.ModTime], f.Size()
	if errors.Is(err, source.ErrChanged) && !f.Entry().Version.Matches(m.cur) {
		m.tally.changed.Add(1)
		if verr := pattern.Verify(seed, p[:k], off); verr != nil {
			return fmt.Errorf("WRONG BYTES before ErrChanged: %w", verr)
		}
		return nil
	}
	want := int(max(min(int64(n), size-off), 0))
	switch {
	case k != want:
		return fmt.Errorf("%d bytes, %v; want %d bytes (size %d)", k, err, want, size)
	case k < n && err != io.EOF:
		return fmt.Errorf("short read of %d bytes with %v, want io.EOF", k, err)
	case k == n && err != nil && err != io.EOF:
		return fmt.Errorf("full read with error %v", err)
	}
	if verr := pattern.Verify(seed, p[:k], off); verr != nil {
		return fmt.Errorf("WRONG BYTES: %w", verr)
	}
	m.tally.bytes.Add(int64(k))
	return nil
}
