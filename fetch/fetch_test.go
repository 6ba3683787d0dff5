package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/readahead"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

const (
	testBlock = 64 << 10
	testSeed  = 7
)

func testOptions() Options {
	o := DefaultOptions()
	o.BlockSize = testBlock
	o.ReadThrough = 4 * testBlock
	o.IOTimeout = 2 * time.Second
	o.StallTimeout = 300 * time.Millisecond
	o.IdleClose = 200 * time.Millisecond
	o.RetryMin = 5 * time.Millisecond
	o.RetryMax = 50 * time.Millisecond
	return o
}

type fixture struct {
	mem   *memsrc.Source
	store *memStore
	f     *Fetcher
	file  *File
}

func newFixture(t *testing.T, size int64, wrap func(source.Source) source.Source, opts Options) *fixture {
	t.Helper()
	mem := memsrc.New()
	mem.AddPattern("a.bin", testSeed, size)
	var src source.Source = mem
	if wrap != nil {
		src = wrap(mem)
	}
	store := newMemStore()
	f := New(src, store, opts, nil)
	v, ok := mem.Version("a.bin")
	if !ok {
		t.Fatal("no version")
	}
	file := f.Open("a.bin", v)
	t.Cleanup(file.Release)
	return &fixture{mem: mem, store: store, f: f, file: file}
}

func (fx *fixture) read(t *testing.T, off, n int64, dec readahead.Decision) error {
	t.Helper()
	p := make([]byte, n)
	got, err := fx.file.Read(context.Background(), p, off, Owner{Handle: 1, Run: dec.Run}, dec)
	if err != nil && err != io.EOF {
		return err
	}
	if verr := pattern.Verify(testSeed, p[:got], off); verr != nil {
		t.Fatalf("read %d+%d: %v", off, n, verr)
	}
	if want := min(n, fx.file.Size()-off); int64(got) != want {
		t.Fatalf("read %d+%d returned %d bytes, want %d", off, n, got, want)
	}
	return nil
}

// openEnded returns test options where every read-ahead window is one open-ended range.
func openEnded() Options {
	o := testOptions()
	o.OpenEndedWindow = testBlock
	return o
}

func noDecision() readahead.Decision { return readahead.Decision{Run: 1, Superseded: -1} }

func ahead(run int, off, end int64) readahead.Decision {
	return readahead.Decision{Run: run, Superseded: -1, Ahead: readahead.Range{Off: off, End: end}}
}

func TestReadsEveryByte(t *testing.T) {
	size := int64(10*testBlock + 123)
	fx := newFixture(t, size, nil, testOptions())
	for off := int64(0); off < size; off += 100_000 {
		if err := fx.read(t, off, 100_000, noDecision()); err != nil {
			t.Fatal(err)
		}
	}
	// A second pass is served from the store without the origin.
	before := fx.mem.Stats().Opens
	if err := fx.read(t, 0, size, noDecision()); err != nil {
		t.Fatal(err)
	}
	if got := fx.mem.Stats().Opens; got != before {
		t.Fatalf("cached read opened %d new ranges", got-before)
	}
	if err := fx.read(t, size, 10, noDecision()); err != nil {
		t.Fatal(err)
	}
}

// One fetch per block: many readers of one missing block share one range.
func TestOneFetchPerBlock(t *testing.T) {
	fx := newFixture(t, 8*testBlock, func(s source.Source) source.Source {
		return memsrc.WithLatency(s, 50*time.Millisecond)
	}, testOptions())
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- fx.read(t, int64(i%4)*1000, 4096, noDecision())
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st := fx.mem.Stats()
	if st.Opens != 1 || st.BytesServed != testBlock {
		t.Fatalf("16 readers of one block: %d opens, %d bytes served; want 1 open, %d bytes", st.Opens, st.BytesServed, testBlock)
	}
}

// A large read-ahead window is filled by one open-ended range, extended as it moves.
func TestReadAheadUsesOneStream(t *testing.T) {
	size := int64(64 * testBlock)
	o := testOptions()
	o.OpenEndedWindow = 4 * testBlock
	fx := newFixture(t, size, func(s source.Source) source.Source {
		return memsrc.WithLatency(s, 20*time.Millisecond)
	}, o)
	for off := int64(0); off < size; off += testBlock {
		if err := fx.read(t, off, testBlock, ahead(1, off+testBlock, min(off+8*testBlock, size))); err != nil {
			t.Fatal(err)
		}
	}
	if got := fx.mem.Stats().Opens; got != 1 {
		t.Fatalf("sequential read with read-ahead opened %d ranges, want 1", got)
	}
	if got := fx.mem.Stats().BytesServed; got != size {
		t.Fatalf("origin served %d bytes for a %d-byte file", got, size)
	}
}

// A small window is fetched as bounded ranges of its size: a reader that leaves after a
// few blocks leaves at most a window in flight.
func TestSmallWindowsAreBoundedRanges(t *testing.T) {
	size := int64(256 * testBlock)
	fx := newFixture(t, size, func(s source.Source) source.Source {
		return memsrc.WithLatency(s, 5*time.Millisecond)
	}, testOptions()) // OpenEndedWindow 16 MiB: every window here is smaller
	for off := int64(0); off < 16*testBlock; off += testBlock {
		if err := fx.read(t, off, testBlock, ahead(1, off+testBlock, off+8*testBlock)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // the reader stops; what is in flight lands
	if got, limit := fx.mem.Stats().BytesServed, int64(16+2*8)*testBlock; got > limit {
		t.Fatalf("reader left after 16 blocks; origin served %d bytes, want at most %d (read plus two windows)", got, limit)
	}
}

// Without a read-ahead decision a read fetches only its blocks: a probe pulls little.
func TestProbeFetchesOnlyWhatIsRead(t *testing.T) {
	size := int64(100 * testBlock)
	fx := newFixture(t, size, nil, testOptions())
	if err := fx.read(t, 0, 1000, noDecision()); err != nil {
		t.Fatal(err)
	}
	if err := fx.read(t, size-1000, 1000, readahead.Decision{Run: 2, Superseded: 1, New: true}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if got := fx.mem.Stats().BytesServed; got > 2*testBlock {
		t.Fatalf("probe of start and end pulled %d bytes, want at most %d", got, 2*testBlock)
	}
}

// A short forward skip reads through the open stream instead of opening a new range.
func TestShortSkipReadsThrough(t *testing.T) {
	size := int64(64 * testBlock)
	fx := newFixture(t, size, func(s source.Source) source.Source {
		return memsrc.WithLatency(s, 20*time.Millisecond)
	}, openEnded())
	if err := fx.read(t, 0, testBlock, ahead(1, testBlock, 4*testBlock)); err != nil {
		t.Fatal(err)
	}
	// Skip 2 blocks past the window: within ReadThrough (4 blocks).
	skip := int64(6 * testBlock)
	dec := readahead.Decision{Run: 2, New: true, Superseded: 1, Fetch: readahead.Range{Off: skip, End: skip + testBlock},
		Ahead: readahead.Range{Off: skip + testBlock, End: skip + 3*testBlock}}
	if err := fx.read(t, skip, testBlock, dec); err != nil {
		t.Fatal(err)
	}
	if got := fx.mem.Stats().Opens; got != 1 {
		t.Fatalf("short skip opened %d ranges, want 1 (read through)", got)
	}
}

// A far seek opens a new range and stops the old stream from reading on.
func TestFarSeekCancelsOldWindow(t *testing.T) {
	size := int64(256 * testBlock)
	fx := newFixture(t, size, func(s source.Source) source.Source {
		return memsrc.WithBandwidth(memsrc.WithLatency(s, 10*time.Millisecond), 20<<20)
	}, openEnded())
	if err := fx.read(t, 0, testBlock, ahead(1, testBlock, 100*testBlock)); err != nil {
		t.Fatal(err)
	}
	far := int64(200 * testBlock)
	dec := readahead.Decision{Run: 2, New: true, Superseded: 1, Fetch: readahead.Range{Off: far, End: far + testBlock}}
	if err := fx.read(t, far, testBlock, dec); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the old window would take 320 ms at 20 MB/s
	if got := fx.mem.Stats().BytesServed; got > 20*testBlock {
		t.Fatalf("after a far seek the abandoned window went on: %d bytes served", got)
	}
}

func TestRetriesTransientErrors(t *testing.T) {
	fx := newFixture(t, 8*testBlock, func(s source.Source) source.Source {
		return memsrc.WithFaults(s, memsrc.FaultPlan{Faults: []memsrc.Fault{
			{N: 1, Kind: memsrc.FailOpen},
			{N: 2, Kind: memsrc.CutShort, At: 1000},
			{N: 3, Kind: memsrc.ReadError, At: testBlock + 10},
		}})
	}, testOptions())
	// One block first, its read-ahead the rest: one range carries all eight blocks, so
	// every fault lands on it (a first read of several missing blocks would put its
	// first block on a range of its own).
	if err := fx.read(t, 0, testBlock, ahead(1, testBlock, 8*testBlock)); err != nil {
		t.Fatal(err)
	}
	if err := fx.read(t, testBlock, 7*testBlock, ahead(1, 8*testBlock, 8*testBlock)); err != nil {
		t.Fatal(err)
	}
	if r := fx.f.Stats().Retries; r < 3 {
		t.Fatalf("want at least 3 retries, got %d", r)
	}
}

func TestUnreachableOriginFailsInBoundedTime(t *testing.T) {
	o := testOptions()
	o.IOTimeout = 300 * time.Millisecond
	fx := newFixture(t, 8*testBlock, func(s source.Source) source.Source {
		return memsrc.WithFaults(s, memsrc.FaultPlan{FailRate: 1})
	}, o)
	start := time.Now()
	err := fx.read(t, 0, 1000, noDecision())
	if err == nil {
		t.Fatal("read from an unreachable origin succeeded")
	}
	if !errors.Is(err, memsrc.ErrInjected) {
		t.Fatalf("error does not say why: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("failing read took %v", d)
	}
	// A read right after fails at once (the failure is remembered briefly), still with an error.
	if err := fx.read(t, 0, 1000, noDecision()); err == nil {
		t.Fatal("second read succeeded against an unreachable origin")
	}
}

func TestStalledBodyIsAbandoned(t *testing.T) {
	fx := newFixture(t, 4*testBlock, func(s source.Source) source.Source {
		return memsrc.WithFaults(s, memsrc.FaultPlan{Faults: []memsrc.Fault{{N: 1, Kind: memsrc.Hang, At: 100}}})
	}, testOptions())
	if err := fx.read(t, 0, testBlock, noDecision()); err != nil {
		t.Fatal(err)
	}
}

func TestChangedObjectNeverMixes(t *testing.T) {
	size := int64(8 * testBlock)
	fx := newFixture(t, size, nil, testOptions())
	if err := fx.read(t, 0, testBlock, noDecision()); err != nil {
		t.Fatal(err)
	}
	fx.mem.ReplacePattern("a.bin", testSeed+1, size)
	err := fx.read(t, 4*testBlock, testBlock, noDecision())
	if !errors.Is(err, source.ErrChanged) {
		t.Fatalf("read after replace: %v, want ErrChanged", err)
	}
	// Even cached blocks are refused now: the old version is gone from the store.
	if err := fx.read(t, 0, testBlock, noDecision()); !errors.Is(err, source.ErrChanged) {
		t.Fatalf("cached read after replace: %v, want ErrChanged", err)
	}
	// The failed stream forgets the old blocks right after its readers got the error
	// (a new File for the key waits for the same signal, fetcher.go).
	select {
	case <-fx.file.forgotten:
	case <-time.After(5 * time.Second):
		t.Fatal("the changed object's blocks were not forgotten within 5 s")
	}
	if n := fx.store.count(); n != 0 {
		t.Fatalf("store still holds %d blocks of the old version", n)
	}
	// A new File for the new version reads the new bytes.
	v, _ := fx.mem.Version("a.bin")
	nf := fx.f.Open("a.bin", v)
	defer nf.Release()
	p := make([]byte, testBlock)
	if _, err := nf.Read(context.Background(), p, 0, Owner{Handle: 2}, noDecision()); err != nil {
		t.Fatal(err)
	}
	if err := pattern.Verify(testSeed+1, p, 0); err != nil {
		t.Fatal(err)
	}
}

func TestFullCacheStillServes(t *testing.T) {
	fx := newFixture(t, 8*testBlock, nil, testOptions())
	fx.store.failPuts = true
	if err := fx.read(t, 0, 8*testBlock, ahead(1, 0, 8*testBlock)); err != nil {
		t.Fatal(err)
	}
	// Cache writes run behind the readers (writer.go): give them time to fail.
	for deadline := time.Now().Add(5 * time.Second); fx.f.Stats().CacheWriteErr == 0; {
		if time.Now().After(deadline) {
			t.Fatal("cache write errors not counted")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	base := runtime.NumGoroutine()
	mem := memsrc.New()
	mem.AddPattern("a.bin", testSeed, 32*testBlock)
	f := New(mem, newMemStore(), testOptions(), nil)
	v, _ := mem.Version("a.bin")
	file := f.Open("a.bin", v)
	p := make([]byte, testBlock)
	if _, err := file.Read(context.Background(), p, 0, Owner{Handle: 1, Run: 1}, ahead(1, testBlock, 32*testBlock)); err != nil {
		t.Fatal(err)
	}
	file.Release()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		t.Fatalf("%d goroutines left after release, started with %d", n, base)
	}
}

// A window that is not a whole number of blocks still yields ranges of whole blocks: a
// range ending inside a block ended every attempt at that block in an early EOF.
func TestUnalignedWindowReadsWholeBlocks(t *testing.T) {
	size := int64(64 * testBlock)
	fx := newFixture(t, size, nil, testOptions())
	for off := int64(0); off < size; off += testBlock {
		dec := ahead(1, off+testBlock, min(off+testBlock+3*testBlock+12345, size))
		if err := fx.read(t, off, testBlock, dec); err != nil {
			t.Fatal(err)
		}
	}
	if r := fx.f.Stats().Retries; r != 0 {
		t.Fatalf("%d retries reading with unaligned windows", r)
	}
}

// hangFirst is a source whose first body hangs until closed and then fails the way an
// HTTP body does when its request is cancelled: with context.Canceled.
type hangFirst struct {
	source.Source
	opened atomic.Int32
}

func (h *hangFirst) OpenRange(ctx context.Context, path string, r source.Range, want source.Version) (source.Body, error) {
	b, err := h.Source.OpenRange(ctx, path, r, want)
	if err != nil || h.opened.Add(1) > 1 {
		return b, err
	}
	return &hungBody{Body: b, closed: make(chan struct{})}, nil
}

type hungBody struct {
	source.Body
	once   sync.Once
	closed chan struct{}
}

func (b *hungBody) Read(p []byte) (int, error) {
	<-b.closed
	return 0, fmt.Errorf("read: %w", context.Canceled)
}

func (b *hungBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return b.Body.Close()
}

// A body abandoned for stalling is retried, even though closing it makes its read fail
// with context.Canceled, which on its own reads as permanent.
func TestStallEndingInCancelIsRetried(t *testing.T) {
	fx := newFixture(t, 4*testBlock, func(s source.Source) source.Source { return &hangFirst{Source: s} }, testOptions())
	if err := fx.read(t, 0, testBlock, noDecision()); err != nil {
		t.Fatalf("read after a stalled body: %v", err)
	}
}

// gatedForget is a memStore whose Forget waits for release, so a test can act while a
// changed object's blocks are still being forgotten.
type gatedForget struct {
	*memStore
	entered, release chan struct{}
}

func (g *gatedForget) Forget(key cache.FileKey) error {
	close(g.entered)
	<-g.release
	return g.memStore.Forget(key)
}

// An object replaced with one of the same size and time has the same cache key. A File
// opened for it after the old one failed as changed must not start before the old
// blocks are forgotten: it would find them, with the old ETag beside them, and serve
// them as its own.
func TestOpenAfterChangeWaitsForForget(t *testing.T) {
	size := int64(8 * testBlock)
	mem := memsrc.New()
	mem.AddPattern("a.bin", testSeed, size)
	store := &gatedForget{memStore: newMemStore(), entered: make(chan struct{}), release: make(chan struct{})}
	f := New(mem, store, testOptions(), nil)
	v := source.Version{Size: size} // no time: old and new versions share the key
	old := f.Open("a.bin", v)
	defer old.Release()
	p := make([]byte, testBlock)
	if _, err := old.Read(context.Background(), p, 0, Owner{Handle: 1}, noDecision()); err != nil {
		t.Fatal(err)
	}
	mem.ReplacePattern("a.bin", testSeed+1, size)
	if _, err := old.Read(context.Background(), p, 4*testBlock, Owner{Handle: 1}, noDecision()); !errors.Is(err, source.ErrChanged) {
		t.Fatalf("read after replace: %v, want ErrChanged", err)
	}
	<-store.entered
	opened := make(chan *File)
	go func() { opened <- f.Open("a.bin", v) }()
	select {
	case nf := <-opened:
		nf.Release()
		t.Fatal("Open returned while the changed object's blocks were still being forgotten")
	case <-time.After(100 * time.Millisecond):
	}
	close(store.release)
	nf := <-opened
	defer nf.Release()
	if _, err := nf.Read(context.Background(), p, 0, Owner{Handle: 2}, noDecision()); err != nil {
		t.Fatal(err)
	}
	if err := pattern.Verify(testSeed+1, p, 0); err != nil {
		t.Fatalf("new File read the old version's cached block: %v", err)
	}
}

// gatedPut is a memStore whose first Put waits for releasePut, and whose second Forget
// waits for releaseForget, so a test can hold a cache write of a changed object in
// flight.
type gatedPut struct {
	*memStore
	putEntered, releasePut, releaseForget chan struct{}
	puts, forgets                         atomic.Int32
}

func (g *gatedPut) Put(key cache.FileKey, block int64, data []byte) error {
	if g.puts.Add(1) == 1 {
		close(g.putEntered)
		<-g.releasePut
	}
	return g.memStore.Put(key, block, data)
}

func (g *gatedPut) Forget(key cache.FileKey) error {
	if g.forgets.Add(1) == 2 {
		<-g.releaseForget
	}
	return g.memStore.Forget(key)
}

// A cache write of the old version that is in flight when the object changes must not
// be visible to a File opened for the new version under the same key: it lands before
// the old blocks are forgotten, never after.
func TestWriteInFlightWhenChangedNeverReachesNewFile(t *testing.T) {
	size := int64(8 * testBlock)
	mem := memsrc.New()
	mem.AddPattern("a.bin", testSeed, size)
	store := &gatedPut{memStore: newMemStore(), putEntered: make(chan struct{}),
		releasePut: make(chan struct{}), releaseForget: make(chan struct{})}
	t.Cleanup(func() { close(store.releaseForget) })
	f := New(mem, store, testOptions(), nil)
	v := source.Version{Size: size} // no time: old and new versions share the key
	old := f.Open("a.bin", v)
	defer old.Release()
	p := make([]byte, testBlock)
	if _, err := old.Read(context.Background(), p, 0, Owner{Handle: 1}, noDecision()); err != nil {
		t.Fatal(err)
	}
	<-store.putEntered // block 0 of the old version is being written
	mem.ReplacePattern("a.bin", testSeed+1, size)
	if _, err := old.Read(context.Background(), p, 4*testBlock, Owner{Handle: 1}, noDecision()); !errors.Is(err, source.ErrChanged) {
		t.Fatalf("read after replace: %v, want ErrChanged", err)
	}
	opened := make(chan *File, 1)
	go func() { opened <- f.Open("a.bin", v) }()
	close(store.releasePut)
	nf := <-opened
	defer nf.Release()
	if _, err := nf.Read(context.Background(), p, 0, Owner{Handle: 2}, noDecision()); err != nil {
		t.Fatal(err)
	}
	if err := pattern.Verify(testSeed+1, p, 0); err != nil {
		t.Fatalf("new File read the old version's block that was being written: %v", err)
	}
}

// Blocks cached under a key whose recorded ETag is not the one the listing now gives
// belong to another version (replaced within the same second, same size): the new File
// drops them and reads the origin, instead of adopting the old ETag.
func TestOtherETagUnderSameKeyIsDropped(t *testing.T) {
	mem := memsrc.New()
	mem.AddPattern("a.bin", testSeed, 4*testBlock)
	store := newMemStore()
	f := New(mem, store, testOptions(), nil)
	v, _ := mem.Version("a.bin")
	v.ETag = `"new"`
	key := cache.FileKey{Source: mem.String(), Path: "a.bin", Version: v.CacheKey()}
	old := make([]byte, testBlock) // zeros: not the object's bytes
	if err := store.Put(key, 0, old); err != nil {
		t.Fatal(err)
	}
	if err := store.SetValidator(key, cache.Validator{ETag: `"old"`}); err != nil {
		t.Fatal(err)
	}
	file := f.Open("a.bin", v)
	defer file.Release()
	if store.Has(key, 0) {
		t.Fatal("blocks of another ETag kept under the key")
	}
	if file.Version().ETag != `"new"` {
		t.Fatalf("File took the cached ETag %q", file.Version().ETag)
	}
}

// rangeLog records every range a source is asked for.
type rangeLog struct {
	source.Source
	mu     sync.Mutex
	ranges []source.Range
}

// sorted returns the ranges asked for so far, by offset.
func (l *rangeLog) sorted() []source.Range {
	l.mu.Lock()
	got := slices.Clone(l.ranges)
	l.mu.Unlock()
	slices.SortFunc(got, func(a, b source.Range) int { return int(a.Off - b.Off) })
	return got
}

func (l *rangeLog) OpenRange(ctx context.Context, path string, r source.Range, want source.Version) (source.Body, error) {
	l.mu.Lock()
	l.ranges = append(l.ranges, r)
	l.mu.Unlock()
	return l.Source.OpenRange(ctx, path, r, want)
}

// A read that lands inside a block and needs the next one too (a seek's first read)
// gets the first block on a range of its own beside the range for the rest, so the two
// arrive side by side; a read within one block, or one a stream is already bringing,
// opens one range.
func TestReadAcrossBlocksFetchesFirstBlockBeside(t *testing.T) {
	size := int64(16 * testBlock)
	var log *rangeLog
	fx := newFixture(t, size, func(s source.Source) source.Source { log = &rangeLog{Source: s}; return log }, testOptions())
	off := int64(5*testBlock - 4096)
	if err := fx.read(t, off, testBlock, ahead(1, off+testBlock, off+4*testBlock)); err != nil {
		t.Fatal(err)
	}
	got := log.sorted()
	if len(got) != 2 || got[0] != (source.Range{Off: 4 * testBlock, Len: testBlock}) || got[1].Off != 5*testBlock {
		t.Fatalf("ranges %v, want [%d, +%d) alone and one from %d", got, 4*testBlock, testBlock, 5*testBlock)
	}
	// Within one block: one range.
	log.mu.Lock()
	log.ranges = nil
	log.mu.Unlock()
	if err := fx.read(t, 12*testBlock+10, 1000, ahead(2, 12*testBlock+1010, 13*testBlock)); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.ranges) != 1 {
		t.Fatalf("a read within one block opened %v", log.ranges)
	}
}

// cappedLog is a rangeLog whose source says it caps each connection (an object store).
type cappedLog struct {
	*rangeLog
	prepared atomic.Int64
}

func (c *cappedLog) Prepare(n int) { c.prepared.Add(int64(n)) }

// From a source that caps each connection, every block of a seek's first read gets a
// range of its own and read-ahead starts at the read's end, so the block the kernel's
// second request reaches arrives beside them, not a block time after.
func TestReadAcrossBlocksFromCappedSourceFetchesEachBlockBeside(t *testing.T) {
	size := int64(16 * testBlock)
	var log *rangeLog
	fx := newFixture(t, size, func(s source.Source) source.Source {
		log = &rangeLog{Source: s}
		return &cappedLog{rangeLog: log}
	}, testOptions())
	off := int64(5*testBlock - 4096)
	if err := fx.read(t, off, testBlock, ahead(1, off+testBlock, off+4*testBlock)); err != nil {
		t.Fatal(err)
	}
	// The read returns with its two blocks; the read-ahead's stream may not have asked
	// for its range yet.
	got := log.sorted()
	for deadline := time.Now().Add(time.Second); len(got) < 3 && time.Now().Before(deadline); got = log.sorted() {
		time.Sleep(time.Millisecond)
	}
	if len(got) != 3 || got[0] != (source.Range{Off: 4 * testBlock, Len: testBlock}) ||
		got[1] != (source.Range{Off: 5 * testBlock, Len: testBlock}) || got[2].Off != 6*testBlock {
		t.Fatalf("ranges %v, want [%d, +%d) and [%d, +%d) alone and one from %d", got,
			4*testBlock, testBlock, 5*testBlock, testBlock, 6*testBlock)
	}
}

// statCounter counts Stat calls (the HEAD a confirmation costs).
type statCounter struct {
	source.Source
	stats atomic.Int64
}

func (s *statCounter) Stat(ctx context.Context, p string) (source.Entry, error) {
	s.stats.Add(1)
	return s.Source.Stat(ctx, p)
}

// Blocks from an earlier run whose recorded ETag the listing names again need no HEAD
// before they are served; blocks recorded with another ETag, or opened from a listing
// without one, are checked or dropped.
func TestListedETagVouchesForCachedBlocks(t *testing.T) {
	mem := memsrc.New()
	mem.AddPattern("a.bin", testSeed, 4*testBlock)
	src := &statCounter{Source: mem}
	store := newMemStore()
	f := New(src, store, testOptions(), nil)
	v, _ := mem.Version("a.bin")
	if v.ETag == "" {
		t.Fatal("memsrc gives no ETag")
	}
	key := cache.FileKey{Source: src.String(), Path: "a.bin", Version: v.CacheKey()}
	block := make([]byte, testBlock)
	pattern.Fill(testSeed, block, 0)
	if err := store.Put(key, 0, block); err != nil {
		t.Fatal(err)
	}
	if err := store.SetValidator(key, cache.Validator{ETag: v.ETag}); err != nil {
		t.Fatal(err)
	}
	file := f.Open("a.bin", v)
	if err := file.Confirm(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	file.Release()
	if n := src.stats.Load(); n != 0 {
		t.Fatalf("%d HEADs for blocks whose ETag the listing gave", n)
	}
	noTag := v
	noTag.ETag = ""
	file = f.Open("a.bin", noTag)
	defer file.Release()
	if err := file.Confirm(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := src.stats.Load(); n != 1 {
		t.Fatalf("%d HEADs for blocks opened from a listing without an ETag, want 1", n)
	}
}

// A player's first window (pace.OpenAtOnce or more) is one open-ended range from its
// first read. Once the reader seeks away its windows are bounded ranges again, from the
// seek's first read on: a reader that seeks often leaves at most a window behind each
// time, not what the path buffers behind an open-ended range.
func TestAPlayersWindowIsOpenEndedUntilItLeaves(t *testing.T) {
	fx, log := loggedFixture(t, 512*testBlock, testOptions()) // OpenEndedWindow 16 MiB: above every window here
	win := int64(4 << 20)                                     // pace.OpenAtOnce, under OpenEndedWindow
	if err := fx.read(t, 0, testBlock, ahead(1, testBlock, testBlock+win)); err != nil {
		t.Fatal(err)
	}
	far := int64(300 * testBlock)
	dec := readahead.Decision{Run: 2, New: true, Superseded: 1, Fetch: readahead.Range{Off: far, End: far + testBlock},
		Ahead: readahead.Range{Off: far + testBlock, End: far + testBlock + win}}
	if err := fx.read(t, far, testBlock, dec); err != nil {
		t.Fatal(err)
	}
	got := log.sorted()
	if len(got) != 2 || got[0].Off != 0 || got[0].Len != -1 || got[1].Off != far || got[1].Len <= 0 {
		t.Fatalf("ranges %v: want one open-ended from 0, then one bounded from %d", got, far)
	}
}

// An open-ended range is asked only up to a block that another range brings or the
// cache holds: one that went on would hold its connection once its own blocks are read,
// the origin sending into it what nobody claimed.
func TestOpenEndedRangeStopsWhereAnotherBegins(t *testing.T) {
	fx, log := loggedFixture(t, 64*testBlock, openEnded())
	// Threads serving one scan: the read of block 1 comes first, then block 0's.
	if err := fx.read(t, testBlock, testBlock, ahead(1, 2*testBlock, 10*testBlock)); err != nil {
		t.Fatal(err)
	}
	if err := fx.read(t, 0, testBlock, ahead(1, 2*testBlock, 10*testBlock)); err != nil {
		t.Fatal(err)
	}
	got := log.sorted()
	if len(got) != 2 || got[0] != (source.Range{Off: 0, Len: testBlock}) || got[1].Off != testBlock || got[1].Len != -1 {
		t.Fatalf("ranges %v: want block 0 alone, then one open-ended from block 1", got)
	}
}

// loggedFixture is a fixture whose source answers in 5 ms and logs every range asked.
func loggedFixture(t *testing.T, size int64, opts Options) (*fixture, *rangeLog) {
	t.Helper()
	log := &rangeLog{}
	fx := newFixture(t, size, func(s source.Source) source.Source {
		log.Source = memsrc.WithLatency(s, 5*time.Millisecond)
		return log
	}, opts)
	return fx, log
}

// A reader that leaves only a bounded run (a demuxer reads the head in a parser's small
// window, then the index at the end, then returns to play) still has its play opened
// at once: it left no open-ended range behind.
func TestLeavingABoundedRunKeepsPlayOpen(t *testing.T) {
	fx, log := loggedFixture(t, 512*testBlock, testOptions())
	if err := fx.read(t, 0, testBlock, ahead(1, testBlock, 9*testBlock)); err != nil {
		t.Fatal(err)
	}
	end := int64(500 * testBlock)
	tail := readahead.Decision{Run: 2, New: true, Superseded: 1, Fetch: readahead.Range{Off: end, End: end + testBlock}}
	if err := fx.read(t, end, testBlock, tail); err != nil {
		t.Fatal(err)
	}
	win := int64(4 << 20) // pace.OpenAtOnce
	back := readahead.Decision{Run: 1, Superseded: 2, Ahead: readahead.Range{Off: 2 * testBlock, End: 2*testBlock + win}}
	if err := fx.read(t, testBlock, testBlock, back); err != nil {
		t.Fatal(err)
	}
	// The read was cached: the window's range is asked by its stream's goroutine.
	open := func(r source.Range) bool { return r.Len == -1 }
	for deadline := time.Now().Add(2 * time.Second); !slices.ContainsFunc(log.sorted(), open) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := log.sorted(); !slices.ContainsFunc(got, open) {
		t.Fatalf("ranges %v: want the play's window open-ended after a bounded head and the tail", got)
	}
}
