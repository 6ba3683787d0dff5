package fetch

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/readahead"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// The tail beside a head read (tail.go), on the emulated far link in a synctest bubble:
// virtual time, so "one round trip" is exact.

// recorder logs every range a source is asked for (when asked, when answered) and
// counts the body bytes read at each offset's block, so a test can tell a block fetched
// twice from one fetched once.
type recorder struct {
	source.Source
	bs int64

	mu     sync.Mutex
	ranges []recorded
	blocks map[int64]int64 // block -> body bytes read in it, over all ranges
}

type recorded struct {
	r               source.Range
	asked, answered time.Time
}

func newRecorder(src source.Source, bs int64) *recorder {
	return &recorder{Source: src, bs: bs, blocks: map[int64]int64{}}
}

func (rc *recorder) OpenRange(ctx context.Context, path string, r source.Range, want source.Version) (source.Body, error) {
	asked := time.Now()
	body, err := rc.Source.OpenRange(ctx, path, r, want)
	rc.mu.Lock()
	rc.ranges = append(rc.ranges, recorded{r: r, asked: asked, answered: time.Now()})
	rc.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &recordedBody{Body: body, rc: rc, pos: r.Off}, nil
}

func (rc *recorder) log() []recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]recorded(nil), rc.ranges...)
}

// served returns the body bytes read per block, and their total.
func (rc *recorder) served() (map[int64]int64, int64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	m, total := map[int64]int64{}, int64(0)
	for b, n := range rc.blocks {
		m[b] = n
		total += n
	}
	return m, total
}

type recordedBody struct {
	source.Body
	rc  *recorder
	pos int64
}

func (b *recordedBody) Read(p []byte) (int, error) {
	n, err := b.Body.Read(p)
	b.rc.mu.Lock()
	for off := b.pos; off < b.pos+int64(n); {
		blk := off / b.rc.bs
		m := min(b.pos+int64(n), (blk+1)*b.rc.bs) - off
		b.rc.blocks[blk] += m
		off += m
	}
	b.rc.mu.Unlock()
	b.pos += int64(n)
	return n, err
}

// tailFixture opens a file of size bytes behind the far link with production options,
// recording its ranges, and returns a read-ahead policy for one handle of it with cfg
// (readahead.DefaultConfig when nil). Call the returned function before the bubble
// ends (see farFixture).
func tailFixture(t *testing.T, size int64, cfg *readahead.Config) (*fixture, *recorder, *readahead.Policy, func()) {
	mem := memsrc.New()
	mem.AddPattern("a.bin", testSeed, size)
	opts := DefaultOptions()
	rec := newRecorder(memsrc.WithBandwidth(memsrc.WithLatency(mem, farRTT), farBandwidth), opts.BlockSize)
	store := newMemStore()
	f := New(rec, store, opts, nil)
	v, _ := mem.Version("a.bin")
	file := f.Open("a.bin", v)
	c := readahead.DefaultConfig()
	if cfg != nil {
		c = *cfg
	}
	return &fixture{mem: mem, store: store, f: f, file: file}, rec, readahead.New(c, size), func() {
		file.Release()
		time.Sleep(time.Minute)
		synctest.Wait()
	}
}

// readPolicy reads n bytes at off as handle 1 through pol, checking the bytes.
func (fx *fixture) readPolicy(t *testing.T, pol *readahead.Policy, off, n int64) {
	t.Helper()
	p := make([]byte, n)
	dec := pol.Read(off, n)
	got, err := fx.file.Read(context.Background(), p, off, Owner{Handle: 1, Run: dec.Run}, dec)
	if err != nil && err != io.EOF {
		t.Fatalf("read %d+%d: %v", off, n, err)
	}
	if int64(got) != min(n, fx.file.Size()-off) {
		t.Fatalf("read %d+%d returned %d bytes", off, n, got)
	}
	if err := pattern.Verify(testSeed, p[:got], off); err != nil {
		t.Fatalf("read %d+%d: %v", off, n, err)
	}
}

// thumbsSize is the bench's thumbs file (scenario.Full().ThumbFile): its last block is
// 77,056 bytes, so the policy's 256 KiB tail is two blocks.
const thumbsSize = 20_000_000

// A scanner's probe (as the kernel sends it: 128 KiB at the head, 64 KiB at the end) of
// a cold file asks the origin for both ends before either answers, so it costs one round
// trip, and fetches the head's seek fetch and the tail's two blocks, nothing more: no
// read-ahead starts at the tail. Without the tail (Config.Tail 0) the same probe costs
// two round trips: the test tells the two apart.
func TestHeadAndTailProbeIsOneRoundTrip(t *testing.T) {
	probe := func(t *testing.T, cfg *readahead.Config) (time.Duration, []recorded, int64) {
		var took time.Duration
		var log []recorded
		var served int64
		synctest.Test(t, func(t *testing.T) {
			fx, rec, pol, done := tailFixture(t, thumbsSize, cfg)
			defer done()
			start := time.Now()
			fx.readPolicy(t, pol, 0, 128<<10)
			fx.readPolicy(t, pol, thumbsSize-64<<10, 64<<10)
			took = time.Since(start)
			time.Sleep(10 * time.Second) // anything started behind the probe has landed
			log = rec.log()
			_, served = rec.served()
		})
		return took, log, served
	}

	took, log, served := probe(t, nil)
	t.Logf("head and tail probe: %v, %d ranges, %d bytes", took, len(log), served)
	if len(log) != 2 {
		t.Fatalf("%d ranges %v, want 2 (the head's seek fetch and the tail)", len(log), log)
	}
	for _, r := range log {
		for _, o := range log {
			if r.asked.After(o.answered) {
				t.Fatalf("range %v asked at %v, after range %v answered at %v: two round trips", r.r, r.asked, o.r, o.answered)
			}
		}
	}
	// One round trip, plus the head's 512 KiB and the tail's 331 KiB at 30 MB/s.
	if took > farRTT+50*time.Millisecond {
		t.Fatalf("probe took %v, want one round trip (%v) and the transfer", took, farRTT)
	}
	const bs = 256 << 10
	if want := int64(2*bs) + thumbsSize - 75*bs; served != want {
		t.Fatalf("probe fetched %d bytes, want %d (two blocks at each end)", served, want)
	}

	off := readahead.DefaultConfig()
	off.Tail = 0
	took0, log0, _ := probe(t, &off)
	t.Logf("without the tail: %v, %d ranges", took0, len(log0))
	if took0 < 2*farRTT {
		t.Fatalf("without the tail the probe took %v, want two round trips", took0)
	}
}

// A reader that reaches the tail while its range is still on the way waits for it: the
// tail's blocks are pending, never asked for twice. Here a second scanner probes the
// same file (its head, then its tail) while the first one's ranges are in flight.
func TestTailInFlightIsWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx, rec, pol, done := tailFixture(t, thumbsSize, nil)
		defer done()
		first := make(chan struct{})
		go func() {
			defer close(first)
			fx.readPolicy(t, pol, 0, 128<<10)
		}()
		synctest.Wait() // both ranges asked for, neither answered
		if n := len(rec.log()); n != 0 {
			t.Fatalf("%d ranges answered before the round trip", n)
		}
		pol2 := readahead.New(readahead.DefaultConfig(), thumbsSize)
		p := make([]byte, 128<<10)
		for _, off := range []int64{0, thumbsSize - 64<<10} {
			dec := pol2.Read(off, 64<<10)
			if _, err := fx.file.Read(context.Background(), p[:64<<10], off, Owner{Handle: 2, Run: dec.Run}, dec); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if err := pattern.Verify(testSeed, p[:64<<10], off); err != nil {
				t.Fatal(err)
			}
		}
		<-first
		time.Sleep(10 * time.Second)
		if log := rec.log(); len(log) != 2 {
			t.Fatalf("%d ranges, want 2: %v", len(log), log)
		}
		blocks, _ := rec.served()
		for b, n := range blocks {
			if n > fx.file.blockLen(b) {
				t.Fatalf("block %d fetched %d bytes, more than once", b, n)
			}
		}
		if n := fx.f.Stats().TailRanges; n != 1 {
			t.Fatalf("%d tail ranges, want 1", n)
		}
	})
}

// A sequential copy from the head fetches every block of the file exactly once: the
// tail it asked for at its first read is reused when the copy gets there, not fetched
// again. Reads of 128 KiB (the kernel's), as fast as the link goes, over 64 MB so the
// copy's window grows into an open-ended range before it reaches the tail.
func TestSequentialCopyFetchesEveryBlockOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size = 64_000_000 // last block short
		fx, rec, pol, done := tailFixture(t, size, nil)
		defer done()
		for off := int64(0); off < size; off += 128 << 10 {
			fx.readPolicy(t, pol, off, 128<<10)
		}
		time.Sleep(10 * time.Second)
		blocks, total := rec.served()
		for b := range fx.file.nblocks {
			if blocks[b] != fx.file.blockLen(b) {
				t.Errorf("block %d: %d bytes fetched, want %d (once)", b, blocks[b], fx.file.blockLen(b))
			}
		}
		if total != size {
			t.Fatalf("copy of %d bytes fetched %d", size, total)
		}
		if n := fx.f.Stats().TailRanges; n != 1 {
			t.Fatalf("%d tail ranges, want 1", n)
		}
	})
}

// A file opened and read only at its head costs at most the tail beside the head read:
// the tail's two blocks, one range, and no read-ahead behind them.
func TestHeadOnlyWastesOnlyTheTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx, rec, pol, done := tailFixture(t, thumbsSize, nil)
		defer done()
		fx.readPolicy(t, pol, 0, 128<<10)
		time.Sleep(10 * time.Second)
		blocks, total := rec.served()
		cfg := readahead.DefaultConfig()
		const bs = 256 << 10
		tail := int64(0)
		for b, n := range blocks {
			if b*bs >= cfg.SeekFetch {
				tail += n
			}
		}
		if tail > cfg.Tail+bs || total-tail > cfg.SeekFetch {
			t.Fatalf("a head read fetched %d bytes at the head and %d elsewhere, want at most %d and %d",
				total-tail, tail, cfg.SeekFetch, cfg.Tail+bs)
		}
		if n := len(rec.log()); n != 2 {
			t.Fatalf("%d ranges, want the head's and the tail's", n)
		}
	})
}

// A head read served from the cache asks for no tail: the reader gets to the tail at
// once, and a tail fetched beside it would arrive no sooner than one fetched then.
func TestNoTailBesideCachedHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fx, rec, pol, done := tailFixture(t, thumbsSize, nil)
		defer done()
		// An earlier reader of the head, without the policy: no tail.
		if err := fx.read(t, 0, 128<<10, noDecision()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		before := len(rec.log())
		fx.readPolicy(t, pol, 0, 128<<10)
		time.Sleep(10 * time.Second)
		if n := fx.f.Stats().TailRanges; n != 0 {
			t.Fatalf("cached head read opened %d tail ranges", n)
		}
		for _, r := range rec.log()[before:] {
			if r.r.Off >= readahead.DefaultConfig().SeekFetch {
				t.Fatalf("cached head read asked for %+v", r.r)
			}
		}
	})
}

// The tail is asked for as every range is, against the File's version: an object
// replaced before the first read fails both ranges, and none of its bytes is kept.
func TestTailOfChangedObjectIsRefused(t *testing.T) {
	size := int64(40 * testBlock)
	var log *rangeLog
	fx := newFixture(t, size, func(s source.Source) source.Source { log = &rangeLog{Source: s}; return log }, testOptions())
	fx.mem.ReplacePattern("a.bin", testSeed+1, size)
	cfg := readahead.DefaultConfig()
	cfg.BlockSize = testBlock
	dec := readahead.New(cfg, size).Read(0, 4096)
	if dec.Tail.Empty() {
		t.Fatalf("no tail in %+v", dec)
	}
	p := make([]byte, 4096)
	if _, err := fx.file.Read(context.Background(), p, 0, Owner{Handle: 1, Run: dec.Run}, dec); !errors.Is(err, source.ErrChanged) {
		t.Fatalf("read of a replaced object: %v, want ErrChanged", err)
	}
	select {
	case <-fx.file.forgotten:
	case <-time.After(5 * time.Second):
		t.Fatal("the changed object's blocks were not forgotten within 5 s")
	}
	// The tail's range may answer after the head's: wait for it to fail too.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		fx.file.mu.Lock()
		n := len(fx.file.rangeStreams)
		fx.file.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d ranges still open", n)
		}
	}
	log.mu.Lock()
	ranges := len(log.ranges)
	log.mu.Unlock()
	if ranges != 2 {
		t.Fatalf("%d ranges asked for, want the head's and the tail's", ranges)
	}
	if n := fx.store.count(); n != 0 {
		t.Fatalf("store holds %d blocks of a replaced object", n)
	}
}
