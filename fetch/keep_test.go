package fetch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/playhead/playhead/source"
)

// landedAll waits until blocks [from, to) of fx's file are in the store and none is
// pending: the read-ahead has landed ahead of its reader.
func landedAll(t *testing.T, fx *fixture, from, to int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		fx.file.mu.Lock()
		n := len(fx.file.pending)
		fx.file.mu.Unlock()
		all := n == 0
		for b := from; b < to && all; b++ {
			all = fx.store.Has(fx.file.key, b)
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("read-ahead [%d, %d) did not land", from, to)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitKept waits until f keeps exactly n blocks.
func waitKept(t *testing.T, f *Fetcher, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.keptBytes.Load() != n*testBlock {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes kept, want %d blocks", f.keptBytes.Load(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (m *memStore) getCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gets
}

// A sequential reader that reaches read-ahead which landed before it came reads it from
// memory, once: no block is read back from the store; a second pass reads the store.
func TestLandedReadAheadIsReadFromMemory(t *testing.T) {
	fx := newFixture(t, 32*testBlock, nil, testOptions())
	fx.f.keepAge = time.Minute // a slow machine must not expire them mid-test
	if err := fx.read(t, 0, testBlock, ahead(1, testBlock, 17*testBlock)); err != nil {
		t.Fatal(err)
	}
	landedAll(t, fx, 1, 17)
	for b := int64(1); b < 17; b++ {
		if err := fx.read(t, b*testBlock, testBlock, noDecision()); err != nil {
			t.Fatal(err)
		}
	}
	if got := fx.store.getCount(); got != 0 {
		t.Fatalf("%d blocks read back from the store, want 0 (kept in memory)", got)
	}
	if got := fx.f.Stats().BlocksKept; got != 16 {
		t.Fatalf("BlocksKept = %d, want 16", got)
	}
	if got := fx.f.keptBytes.Load(); got != 0 {
		t.Fatalf("%d bytes still kept after every kept block was read", got)
	}
	if err := fx.read(t, testBlock, 16*testBlock, noDecision()); err != nil {
		t.Fatal(err)
	}
	if got := fx.store.getCount(); got != 16 {
		t.Fatalf("second pass read %d blocks from the store, want 16", got)
	}
}

// KeepBytes bounds what is kept; a negative one keeps nothing.
func TestKeptBlocksAreBounded(t *testing.T) {
	for _, tc := range []struct {
		keep int64
		want int64
	}{{4 * testBlock, 4}, {-1, 0}} {
		o := testOptions()
		o.KeepBytes = tc.keep
		fx := newFixture(t, 32*testBlock, nil, o)
		fx.f.keepAge = time.Minute
		if err := fx.read(t, 0, testBlock, ahead(1, testBlock, 17*testBlock)); err != nil {
			t.Fatal(err)
		}
		landedAll(t, fx, 1, 17)
		if got := fx.f.keptBytes.Load(); got != tc.want*testBlock {
			t.Fatalf("KeepBytes %d: %d bytes kept, want %d", tc.keep, got, tc.want*testBlock)
		}
		if err := fx.read(t, testBlock, 16*testBlock, noDecision()); err != nil {
			t.Fatal(err)
		}
		if got := fx.f.Stats().BlocksKept; got != tc.want {
			t.Fatalf("KeepBytes %d: BlocksKept = %d, want %d", tc.keep, got, tc.want)
		}
		if got := fx.store.getCount(); got != int(16-tc.want) {
			t.Fatalf("KeepBytes %d: %d blocks read from the store, want %d", tc.keep, got, 16-tc.want)
		}
	}
}

// A File keeps nothing once its last handle closed or its object changed, and its kept
// buffers go back to the pool.
func TestKeptBlocksGoWithTheFile(t *testing.T) {
	fx := newFixture(t, 32*testBlock, nil, testOptions())
	v, _ := fx.mem.Version("a.bin")
	second := fx.f.Open("a.bin", v) // the fixture's handle stays open
	if second != fx.file {
		t.Fatal("a second open of the same version is another File")
	}
	if err := fx.read(t, 0, testBlock, ahead(1, testBlock, 9*testBlock)); err != nil {
		t.Fatal(err)
	}
	landedAll(t, fx, 1, 9)
	if got := fx.f.keptBytes.Load(); got != 8*testBlock {
		t.Fatalf("%d bytes kept, want %d", got, 8*testBlock)
	}
	fx.file.fail(&source.PathError{Op: "read", Path: "a.bin", Off: -1, Err: source.ErrChanged})
	// (Released with entries: TestKeptBlocksGoOnRelease.)
	if got := fx.f.keptBytes.Load(); got != 0 {
		t.Fatalf("%d bytes still kept by a File whose object changed", got)
	}
	if got := fx.f.bufs.out.Load(); got != 0 {
		t.Fatalf("%d block buffers held after the object changed", got)
	}
	if err := fx.read(t, testBlock, testBlock, noDecision()); !errors.Is(err, source.ErrChanged) {
		t.Fatalf("read after the change: %v, want ErrChanged", err)
	}
	second.Release()

	// Released: a File whose last handle closed keeps nothing, even a block that lands
	// after the close (a stream's last block, whose waiter gave up meanwhile).
	fx2 := newFixture(t, 32*testBlock, nil, testOptions())
	fx2.mem.AddPattern("b.bin", testSeed, 32*testBlock)
	v2, _ := fx2.mem.Version("b.bin")
	fl := fx2.f.Open("b.bin", v2)
	fl.Release()
	p := &pending{done: closedChan, buf: fx2.f.getBuf()}
	p.data = p.buf.b[:testBlock]
	fl.mu.Lock()
	fl.pending[5] = p
	fl.mu.Unlock()
	fl.landed(5, p)
	if got := fx2.f.keptBytes.Load(); got != 0 {
		t.Fatalf("%d bytes kept by a released File", got)
	}
	if got := fx2.f.bufs.out.Load(); got != 0 {
		t.Fatalf("%d block buffers held by a released File", got)
	}
}

// A kept block its reader does not come for within keepAge is let go: by its own File
// when it lands another block, by every File's sweep when the budget is spent, and by
// the timer that runs while anything is kept, when nothing lands any more.
func TestKeptBlocksExpire(t *testing.T) {
	fx := newFixture(t, 32*testBlock, nil, testOptions())
	fx.f.keepAge = time.Minute
	if err := fx.read(t, 0, testBlock, ahead(1, testBlock, 9*testBlock)); err != nil {
		t.Fatal(err)
	}
	landedAll(t, fx, 1, 9)
	later := time.Now().Add(time.Minute)
	fx.file.mu.Lock()
	fx.file.expireKept(later.Add(-30*time.Second), false, false)
	n := len(fx.file.kept)
	fx.file.mu.Unlock()
	if n != 8 {
		t.Fatalf("%d blocks kept before keepAge, want 8", n)
	}
	fx.f.sweepKept(later)
	if got := fx.f.keptBytes.Load(); got != 0 {
		t.Fatalf("%d bytes kept past keepAge after a sweep", got)
	}
	if got := fx.f.bufs.out.Load(); got != 0 {
		t.Fatalf("%d block buffers held past keepAge", got)
	}

	// The timer: a File whose reader went away lets go without landing anything more.
	fx2 := newFixture(t, 32*testBlock, nil, testOptions())
	fx2.f.keepAge = 500 * time.Millisecond
	if err := fx2.read(t, 0, testBlock, ahead(1, testBlock, 9*testBlock)); err != nil {
		t.Fatal(err)
	}
	landedAll(t, fx2, 1, 9)
	if got := fx2.f.keptBytes.Load(); got != 8*testBlock {
		t.Fatalf("%d bytes kept on landing, want 8 blocks", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for fx2.f.keptBytes.Load() != 0 || fx2.f.bufs.out.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still kept, %d buffers held, seconds after keepAge", fx2.f.keptBytes.Load(), fx2.f.bufs.out.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := fx2.f.Stats().BlocksKept; got != 0 {
		t.Fatalf("BlocksKept = %d with nobody reading", got)
	}
}

// A block whose cache write failed (a full disk) is still kept for its reader, and read
// from the origin again after that.
func TestKeptBlockWhoseWriteFailed(t *testing.T) {
	fx := newFixture(t, 32*testBlock, nil, testOptions())
	fx.f.keepAge = time.Minute
	fx.store.mu.Lock()
	fx.store.failPuts = true
	fx.store.mu.Unlock()
	if err := fx.read(t, 0, testBlock, ahead(1, testBlock, 5*testBlock)); err != nil {
		t.Fatal(err)
	}
	waitKept(t, fx.f, 4)
	before := fx.mem.Stats().BytesServed
	if err := fx.read(t, testBlock, 4*testBlock, noDecision()); err != nil {
		t.Fatal(err)
	}
	if got := fx.mem.Stats().BytesServed - before; got != 0 {
		t.Fatalf("kept blocks read %d bytes from the origin, want 0", got)
	}
	if err := fx.read(t, testBlock, 4*testBlock, noDecision()); err != nil {
		t.Fatal(err)
	}
	if got := fx.mem.Stats().BytesServed - before; got != 4*testBlock {
		t.Fatalf("the second read fetched %d bytes, want the 4 uncached blocks (%d)", got, 4*testBlock)
	}
}

// The last handle's release lets go of every kept block.
func TestKeptBlocksGoOnRelease(t *testing.T) {
	fx := newFixture(t, 32*testBlock, nil, testOptions())
	fx.f.keepAge = time.Minute
	fx.mem.AddPattern("b.bin", testSeed, 32*testBlock)
	v, _ := fx.mem.Version("b.bin")
	fl := fx.f.Open("b.bin", v)
	if _, err := fl.Read(context.Background(), make([]byte, testBlock), 0, Owner{Handle: 9, Run: 1}, ahead(1, testBlock, 9*testBlock)); err != nil {
		t.Fatal(err)
	}
	waitKept(t, fx.f, 8)
	fl.Release()
	if got := fx.f.keptBytes.Load(); got != 0 {
		t.Fatalf("%d bytes kept after the last handle closed", got)
	}
	if got := fx.f.bufs.out.Load(); got != 0 {
		t.Fatalf("%d block buffers held after the last handle closed", got)
	}
}
