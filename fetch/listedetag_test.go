package fetch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// listedETags serves mem's bytes under a version the test sets, as an object store
// does: its listing gives the ETag with the size and a time in whole seconds, so two
// versions may differ by their ETag only.
type listedETags struct {
	*memsrc.Source
	mu sync.Mutex
	v  source.Version
}

func (s *listedETags) set(v source.Version) {
	s.mu.Lock()
	s.v = v
	s.mu.Unlock()
}

func (s *listedETags) version() source.Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v
}

func (s *listedETags) Stat(ctx context.Context, p string) (source.Entry, error) {
	if _, err := s.Source.Stat(ctx, p); err != nil {
		return source.Entry{}, err
	}
	return source.Entry{Name: p, Version: s.version()}, nil
}

func (s *listedETags) OpenRange(ctx context.Context, p string, r source.Range, want source.Version) (source.Body, error) {
	v := s.version()
	if !want.Matches(v) {
		return nil, &source.PathError{Op: "open", Path: p, Off: r.Off, Err: fmt.Errorf("%w: origin has %v", source.ErrChanged, v)}
	}
	b, err := s.Source.OpenRange(ctx, p, r, source.AnyVersion)
	if err != nil {
		return nil, err
	}
	return versionedBody{b, v}, nil
}

type versionedBody struct {
	source.Body
	v source.Version
}

func (b versionedBody) Version() source.Version { return b.v }

// A File whose listing gave the ETag records it beside the blocks it caches, so that a
// later File under the same key (same size and second) with another ETag drops them.
// Without the record, an object replaced within a second, after its last handle was
// closed, was served from the old object's cached blocks to every new open.
func TestListedETagRecordedSoReplacementWithinASecondIsNotServedOld(t *testing.T) {
	const size = 4 * testBlock
	mem := memsrc.New()
	mem.AddPattern("a.bin", testSeed, size)
	src := &listedETags{Source: mem}
	at := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	v1 := source.Version{Size: size, ModTime: at, ETag: `"1"`}
	src.set(v1)
	store := newMemStore()
	f := New(src, store, testOptions(), nil)
	key := cache.FileKey{Source: src.String(), Path: "a.bin", Version: v1.CacheKey()}

	old := f.Open("a.bin", v1)
	p := make([]byte, testBlock)
	if _, err := old.Read(context.Background(), p, 0, Owner{Handle: 1}, noDecision()); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); !store.Has(key, 0); time.Sleep(time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("block 0 never reached the cache")
		}
	}
	old.Release()
	if val, ok := store.Validator(key); !ok || val.ETag != v1.ETag {
		t.Fatalf("validator beside the blocks: %+v, %v; want the listed ETag %s", val, ok, v1.ETag)
	}

	mem.ReplacePattern("a.bin", testSeed+1, size)
	v2 := source.Version{Size: size, ModTime: at, ETag: `"2"`} // same key, other ETag
	src.set(v2)
	nf := f.Open("a.bin", v2)
	defer nf.Release()
	if err := nf.Confirm(context.Background(), 0); err != nil && !errors.Is(err, source.ErrChanged) {
		t.Fatal(err)
	}
	if _, err := nf.Read(context.Background(), p, 0, Owner{Handle: 2}, noDecision()); err != nil {
		t.Fatal(err)
	}
	if err := pattern.Verify(testSeed+1, p, 0); err != nil {
		t.Fatalf("a File of the new version read the old version's cached block: %v", err)
	}
}
