package fetch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/readahead"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// A cache write queued by a File that was released before it landed must not land after a
// File of another version of the same key (an object replaced within a second at the same
// size) has dropped the key's blocks: it would be served as the new object's.
func TestLateWriteOfReleasedFileNeverLandsUnderNewVersion(t *testing.T) {
	const size = 4 * testBlock
	mem := memsrc.New()
	mem.AddPattern("a.bin", testSeed, size)
	src := &listedETags{Source: mem}
	at := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	v1 := source.Version{Size: size, ModTime: at, ETag: `"1"`}
	src.set(v1)
	store := &gatedPut{memStore: newMemStore(), putEntered: make(chan struct{}),
		releasePut: make(chan struct{}), releaseForget: make(chan struct{})}
	close(store.releaseForget)
	f := New(src, store, testOptions(), nil)
	key := cache.FileKey{Source: src.String(), Path: "a.bin", Version: v1.CacheKey()}
	old := f.Open("a.bin", v1)
	p := make([]byte, testBlock)
	if _, err := old.Read(context.Background(), p, 0, Owner{Handle: 1}, noDecision()); err != nil {
		t.Fatal(err)
	}
	<-store.putEntered // block 0 of v1 being written
	old.Release()
	mem.ReplacePattern("a.bin", testSeed+1, size)
	v2 := source.Version{Size: size, ModTime: at, ETag: `"2"`}
	src.set(v2)
	// The new File's open waits for the write in flight (the key's fence), so the write
	// is let go while the open is under way.
	opened := make(chan *File)
	go func() { opened <- f.Open("a.bin", v2) }()
	time.Sleep(20 * time.Millisecond)
	close(store.releasePut)
	var nf *File
	select {
	case nf = <-opened:
	case <-time.After(5 * time.Second):
		t.Fatal("the open of the new version did not return")
	}
	defer nf.Release()
	for start := time.Now(); !store.Has(key, 0) && time.Since(start) < time.Second; time.Sleep(time.Millisecond) {
	}
	t.Logf("late block 0 of v1 in the cache: %v", store.Has(key, 0))
	if _, err := nf.Read(context.Background(), p, 0, Owner{Handle: 2}, noDecision()); err != nil {
		t.Fatal(err)
	}
	if err := pattern.Verify(testSeed+1, p, 0); err != nil {
		t.Fatalf("new File read the released File's late block: %v", err)
	}
}

// A File of the old version is released with cache writes still queued; a File opened
// from a listing that names no ETag and no time (nginx's HTML: every version of a size
// shares the key) adopts the old ETag recorded beside the blocks, is found changed and
// drops the key. The released File's queued writes must not land after that drop, or the
// next File of the key, the new version's, serves them as its own (found by
// TestModelChangesThroughFUSE: whole blocks of the old version in a new handle's read).
func TestQueuedWriteOfReleasedFileNeverLandsAfterAChangeIsFound(t *testing.T) {
	const size = 8 * testBlock
	mem := memsrc.New()
	mem.AddPattern("a.bin", testSeed, size)
	store := &gatedPut{memStore: newMemStore(), putEntered: make(chan struct{}),
		releasePut: make(chan struct{}), releaseForget: make(chan struct{})}
	close(store.releaseForget)
	f := New(mem, store, testOptions(), nil)
	v := source.Version{Size: size} // the listing's: no ETag, no time
	old := f.Open("a.bin", v)
	// One range of four blocks (a seek's demand fetch), one answer: block 0's write is
	// held in the store, blocks 1 to 3 queue behind it.
	dec := readahead.Decision{Run: 1, Superseded: -1, Fetch: readahead.Range{Off: 0, End: 4 * testBlock}}
	p := make([]byte, 4*testBlock)
	if _, err := old.Read(context.Background(), p[:testBlock], 0, Owner{Handle: 1}, dec); err != nil {
		t.Fatal(err)
	}
	<-store.putEntered
	old.Release()
	mem.ReplacePattern("a.bin", testSeed+1, size)
	mid := f.Open("a.bin", v) // adopts the old ETag recorded beside the blocks
	confirmed := make(chan error, 1)
	go func() { confirmed <- mid.Confirm(context.Background(), 0) }()
	time.Sleep(20 * time.Millisecond)
	close(store.releasePut) // block 0 lands; the change's drop and the queued writes race
	select {
	case err := <-confirmed:
		if !errors.Is(err, source.ErrChanged) {
			t.Fatalf("the File that adopted the old ETag confirmed with %v, want it changed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Confirm did not return")
	}
	mid.Release()
	for start := time.Now(); store.puts.Load() < 4 && time.Since(start) < time.Second; time.Sleep(time.Millisecond) {
	} // the released File's queue drained (or refused)
	nf := f.Open("a.bin", v)
	defer nf.Release()
	if err := nf.Confirm(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := nf.Read(context.Background(), p, 0, Owner{Handle: 2}, noDecision()); err != nil {
		t.Fatal(err)
	}
	if err := pattern.Verify(testSeed+1, p, 0); err != nil {
		t.Fatalf("the new version's File served the released File's queued blocks: %v", err)
	}
}

// A released File of the old version learns late that its object changed (a range it
// had asked answers 412) after a newer File already dropped that version and a File of
// the new version cached blocks under the same key. The late news is about the old
// version only: the new version's blocks stay cached, and its File keeps caching.
func TestLateChangeFoundByOlderFileKeepsTheNewVersionsBlocks(t *testing.T) {
	const size = 8 * testBlock
	mem := memsrc.New()
	mem.AddPattern("a.bin", testSeed, size)
	store := newMemStore()
	f := New(mem, store, testOptions(), nil)
	v := source.Version{Size: size} // the listing's: no ETag, no time, one key for all
	key := cache.FileKey{Source: mem.String(), Path: "a.bin", Version: v.CacheKey()}
	waitCached := func(blocks ...int64) bool {
		for start := time.Now(); time.Since(start) < 2*time.Second; time.Sleep(time.Millisecond) {
			all := true
			for _, b := range blocks {
				all = all && store.Has(key, b)
			}
			if all {
				return true
			}
		}
		return false
	}
	p := make([]byte, testBlock)

	old := f.Open("a.bin", v)
	if _, err := old.Read(context.Background(), p, 0, Owner{Handle: 1}, noDecision()); err != nil {
		t.Fatal(err)
	}
	if !waitCached(0) {
		t.Fatal("block 0 of the old version was not cached")
	}
	old.Release()
	mem.ReplacePattern("a.bin", testSeed+1, size)

	mid := f.Open("a.bin", v) // adopts the old ETag recorded beside the blocks
	if err := mid.Confirm(context.Background(), 0); !errors.Is(err, source.ErrChanged) {
		t.Fatalf("the File that adopted the old ETag confirmed with %v, want it changed", err)
	}
	mid.Release()

	cur := f.Open("a.bin", v)
	defer cur.Release()
	if err := cur.Confirm(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	for b := int64(0); b < 2; b++ {
		if _, err := cur.Read(context.Background(), p, b*testBlock, Owner{Handle: 2}, noDecision()); err != nil {
			t.Fatal(err)
		}
	}
	if !waitCached(0, 1) {
		t.Fatal("the new version's blocks 0 and 1 were not cached")
	}

	// The old File's late range: found changed, as rangeStream.fail finds it.
	errChanged := &source.PathError{Op: "open range", Path: "a.bin", Off: 2 * testBlock, Err: source.ErrChanged}
	old.mu.Lock()
	drop := old.changed(errChanged)
	old.mu.Unlock()
	if !drop {
		t.Fatal("the old File had already failed")
	}
	old.dropCache(errChanged)

	if !store.Has(key, 0) || !store.Has(key, 1) {
		t.Fatal("the old File's late change dropped the new version's cached blocks")
	}
	if _, err := cur.Read(context.Background(), p, 2*testBlock, Owner{Handle: 2}, noDecision()); err != nil {
		t.Fatal(err)
	}
	if err := pattern.Verify(testSeed+1, p, 2*testBlock); err != nil {
		t.Fatal(err)
	}
	if !waitCached(2) {
		t.Fatal("after the old File's late change the new version's File no longer caches its blocks")
	}
}
