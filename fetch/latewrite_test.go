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
