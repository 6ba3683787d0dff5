package fetch

import (
	"context"
	"testing"
	"time"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// heldSource serves its bytes in [from, to) of every file as held elsewhere (a peer tier
// reading them from their owner), the rest as from the origin.
type heldSource struct {
	source.Source
	from, to int64
}

func (h heldSource) OpenRange(ctx context.Context, p string, r source.Range, want source.Version) (source.Body, error) {
	b, err := h.Source.OpenRange(ctx, p, r, want)
	if err != nil {
		return nil, err
	}
	return &heldBody{Body: b, pos: r.Off, from: h.from, to: h.to}, nil
}

type heldBody struct {
	source.Body
	pos, from, to int64
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.Body.Read(p)
	b.pos += int64(n)
	return n, err
}

// HeldFrom: every byte delivered from off to pos lies in [from, to).
func (b *heldBody) HeldFrom(off int64) bool { return off >= b.from && b.pos <= b.to }

var _ HeldBody = (*heldBody)(nil)

// settled waits until no block of fl is pending: every fetched block is written to the
// store or was not to be.
func settled(t *testing.T, fl *File) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		fl.mu.Lock()
		n := len(fl.pending)
		fl.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d blocks still pending", n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Blocks a HeldBody says another cache holds are served and not written to this one; a
// block with one byte from the origin is, whole.
func TestHeldBlocksAreNotCached(t *testing.T) {
	// Held: from the middle of block 2 to the middle of block 9, so blocks 3 to 8 are
	// held whole and 2 and 9 are not.
	from, to := int64(2*testBlock+testBlock/2), int64(9*testBlock+testBlock/2)
	wrap := func(s source.Source) source.Source { return heldSource{Source: s, from: from, to: to} }
	fx := newFixture(t, 16*testBlock, wrap, testOptions())
	fx.f.keepAge = time.Minute
	if err := fx.read(t, 0, testBlock, ahead(1, testBlock, 16*testBlock)); err != nil {
		t.Fatal(err)
	}
	for b := int64(1); b < 16; b++ {
		if err := fx.read(t, b*testBlock, testBlock, ahead(1, (b+1)*testBlock, 16*testBlock)); err != nil {
			t.Fatal(err)
		}
	}
	settled(t, fx.file)
	for b := int64(0); b < 16; b++ {
		held := b >= 3 && b <= 8
		if got := fx.store.Has(fx.file.key, b); got == held {
			t.Errorf("block %d: cached %v, want %v (held elsewhere: %v)", b, got, !held, held)
		}
	}
	if got := fx.f.Stats().BlocksHeld; got != 6 {
		t.Errorf("BlocksHeld = %d, want 6", got)
	}
	if got := fx.f.Stats().Requests; got > 2 {
		t.Errorf("%d ranges opened for one sequential pass, want at most 2: held blocks landed for their reader", got)
	}
}

// Into a checksumming cache, a block that follows held ones on the same stream (whose
// checksum the stream skipped while it guessed the block held) is written with its
// right checksum: it reads back, not as a miss.
func TestBlockAfterHeldOnesHasItsChecksum(t *testing.T) {
	c, _, file := heldIntoCache(t, 4*testBlock, testOptions())
	defer c.Close()
	defer file.Release()
	p := make([]byte, 8*testBlock)
	dec := ahead(1, testBlock, 8*testBlock)
	if _, err := file.Read(context.Background(), p, 0, Owner{Handle: 1, Run: 1}, dec); err != nil {
		t.Fatal(err)
	}
	settled(t, file)
	buf := make([]byte, testBlock)
	for b := int64(0); b < 8; b++ {
		n, ok := c.Get(context.Background(), file.key, b, buf)
		if held := b < 4; ok == held {
			t.Fatalf("block %d: read back from the cache %v, want %v", b, ok, !held)
		}
		if ok {
			if err := pattern.Verify(testSeed, buf[:n], b*testBlock); err != nil {
				t.Fatalf("block %d: %v", b, err)
			}
		}
	}
	if got := c.Stats().Corrupt; got != 0 {
		t.Fatalf("%d blocks failed their checksum", got)
	}
}

// Held read-ahead past the keep budget is written with the checksum its stream skipped:
// it reads back from a checksumming cache.
func TestHeldBlockWrittenPastTheBudgetHasItsChecksum(t *testing.T) {
	o := testOptions()
	o.KeepBytes = 2 * testBlock
	c, f, file := heldIntoCache(t, 8*testBlock, o)
	defer c.Close()
	defer file.Release()
	f.keepAge = time.Minute
	p := make([]byte, testBlock)
	if _, err := file.Read(context.Background(), p, 0, Owner{Handle: 1, Run: 1}, ahead(1, testBlock, 8*testBlock)); err != nil {
		t.Fatal(err)
	}
	settled(t, file)
	buf := make([]byte, testBlock)
	for b := int64(3); b < 8; b++ { // 1 and 2 kept, the rest written
		n, ok := c.Get(context.Background(), file.key, b, buf)
		if !ok {
			t.Fatalf("block %d: not in the cache, or failed its checksum (corrupt %d)", b, c.Stats().Corrupt)
		}
		if err := pattern.Verify(testSeed, buf[:n], b*testBlock); err != nil {
			t.Fatalf("block %d: %v", b, err)
		}
	}
}

// Held read-ahead that memory cannot keep for its reader is written to the cache as any
// block: the reader finds it there and nothing is fetched twice.
func TestHeldReadAheadPastTheKeepBudgetIsWritten(t *testing.T) {
	o := testOptions()
	o.KeepBytes = 2 * testBlock
	wrap := func(s source.Source) source.Source { return heldSource{Source: s, from: 0, to: 16 * testBlock} }
	fx := newFixture(t, 16*testBlock, wrap, o)
	fx.f.keepAge = time.Minute
	if err := fx.read(t, 0, testBlock, ahead(1, testBlock, 16*testBlock)); err != nil {
		t.Fatal(err)
	}
	settled(t, fx.file)
	if err := fx.read(t, testBlock, 15*testBlock, noDecision()); err != nil {
		t.Fatal(err)
	}
	if got := fx.f.Stats().Requests; got != 1 {
		t.Errorf("%d ranges opened, want 1: read-ahead past the keep budget was fetched again", got)
	}
	st := fx.f.Stats()
	if st.BlocksKept != 2 || st.BlocksHeld != 3 { // block 0 went to its reader, 1 and 2 kept
		t.Errorf("BlocksKept %d, BlocksHeld %d: want 2 kept and 3 held", st.BlocksKept, st.BlocksHeld)
	}
	if got := fx.store.count(); got != 13 {
		t.Errorf("%d blocks written, want the 13 memory could not keep", got)
	}
}

// Held read-ahead is not in the cache to be read back, so the keep timer leaves it for
// its reader (a slow or paused player reads it long after it landed, and would ask the
// owner for it again) while it lets the other kept blocks go; a sweep when the keep
// budget is spent lets it go too.
func TestHeldKeptBlocksWaitForTheirReader(t *testing.T) {
	// Blocks 1 to 4 held, 5 to 8 from the origin (written, and kept as before).
	wrap := func(s source.Source) source.Source { return heldSource{Source: s, from: 0, to: 5 * testBlock} }
	fx := newFixture(t, 32*testBlock, wrap, testOptions())
	fx.f.keepAge = 20 * time.Millisecond
	if err := fx.read(t, 0, testBlock, ahead(1, testBlock, 9*testBlock)); err != nil {
		t.Fatal(err)
	}
	settled(t, fx.file)
	deadline := time.Now().Add(5 * time.Second)
	for fx.f.keptBytes.Load() != 4*testBlock { // the timer lets the four written ones go
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes kept, want the 4 held blocks once the timer ran", fx.f.keptBytes.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(5 * fx.f.keepAge) // and leaves the held ones, tick after tick
	if got := fx.f.keptBytes.Load(); got != 4*testBlock {
		t.Fatalf("%d bytes kept, want the 4 held blocks", got)
	}
	if err := fx.read(t, testBlock, 8*testBlock, noDecision()); err != nil {
		t.Fatal(err)
	}
	if st := fx.f.Stats(); st.Requests != 1 || st.BlocksKept != 4 {
		t.Fatalf("%d ranges opened and %d blocks read from memory: want 1 and 4", st.Requests, st.BlocksKept)
	}
	if err := fx.read(t, 9*testBlock, testBlock, ahead(1, 10*testBlock, 17*testBlock)); err != nil {
		t.Fatal(err)
	}
	settled(t, fx.file)
	fx.f.sweepKept(time.Now().Add(time.Minute))
	if got := fx.f.keptBytes.Load(); got != 0 {
		t.Fatalf("%d bytes still kept after a sweep", got)
	}
}

// A held block read in parts, in any order (a player's unaligned reads; the kernel's
// reads from several threads), is fetched once: it stays in memory until its readers
// have taken all of it, whether it was read ahead or waited for.
func TestHeldBlockReadInPartsIsFetchedOnce(t *testing.T) {
	wrap := func(s source.Source) source.Source { return heldSource{Source: s, from: 0, to: 32 * testBlock} }
	fx := newFixture(t, 32*testBlock, wrap, testOptions())
	fx.f.keepAge = time.Minute
	half := int64(testBlock / 2)
	// Waited for: the first half of block 0, then its second half.
	if err := fx.read(t, 0, half, noDecision()); err != nil {
		t.Fatal(err)
	}
	settled(t, fx.file)
	if err := fx.read(t, half, half, ahead(1, testBlock, 9*testBlock)); err != nil {
		t.Fatal(err)
	}
	settled(t, fx.file)
	// Read ahead: blocks 1 to 8 in reads that straddle them, the first half of block 1
	// last.
	for off := testBlock + half; off < 8*testBlock; off += testBlock {
		if err := fx.read(t, off, testBlock, noDecision()); err != nil {
			t.Fatal(err)
		}
	}
	if err := fx.read(t, testBlock, half, noDecision()); err != nil {
		t.Fatal(err)
	}
	if got := fx.f.Stats().Requests; got != 2 {
		t.Errorf("%d ranges opened, want 2 (block 0, then the read-ahead): a block read in parts was fetched again", got)
	}
	if got := fx.f.keptBytes.Load(); got != testBlock { // block 8's second half is unread
		t.Errorf("%d bytes kept, want block 8's, half read", got)
	}
}

// Held read-ahead that a sweep lets go of before its reader came (the keep budget spent
// by others) is written to the cache, not dropped: its reader finds it there and the
// owner is not asked twice.
func TestSweptHeldBlocksAreWritten(t *testing.T) {
	wrap := func(s source.Source) source.Source { return heldSource{Source: s, from: 0, to: 32 * testBlock} }
	fx := newFixture(t, 32*testBlock, wrap, testOptions())
	fx.f.keepAge = time.Minute
	if err := fx.read(t, 0, testBlock, ahead(1, testBlock, 9*testBlock)); err != nil {
		t.Fatal(err)
	}
	settled(t, fx.file)
	if got := fx.store.count(); got != 0 {
		t.Fatalf("%d blocks written before the sweep, want 0", got)
	}
	fx.f.sweepKept(time.Now().Add(time.Hour))
	settled(t, fx.file)
	if got := fx.f.keptBytes.Load(); got != 0 {
		t.Fatalf("%d bytes still kept after a sweep", got)
	}
	if got := fx.store.count(); got != 8 {
		t.Fatalf("%d blocks written by the sweep, want the 8 unread held ones", got)
	}
	if err := fx.read(t, testBlock, 8*testBlock, noDecision()); err != nil {
		t.Fatal(err)
	}
	if got := fx.f.Stats().Requests; got != 1 {
		t.Fatalf("%d ranges opened, want 1: swept blocks were fetched again", got)
	}
}

// heldIntoCache opens an 8-block pattern file on a Fetcher over a checksumming cache,
// its bytes [0, heldTo) held elsewhere. The caller closes the cache and releases the
// file.
func heldIntoCache(t *testing.T, heldTo int64, o Options) (*cache.Cache, *Fetcher, *File) {
	t.Helper()
	c, err := cache.Open(cache.Options{Dir: t.TempDir(), BlockSize: testBlock, MaxBytes: 64 * testBlock})
	if err != nil {
		t.Fatal(err)
	}
	mem := memsrc.New()
	mem.AddPattern("a.bin", testSeed, 8*testBlock)
	f := New(heldSource{Source: mem, from: 0, to: heldTo}, c, o, nil)
	v, _ := mem.Version("a.bin")
	return c, f, f.Open("a.bin", v)
}
