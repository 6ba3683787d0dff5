package fetch

import (
	"context"
	"errors"
	"testing"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/readahead"
	"github.com/playhead/playhead/source"
)

// A read of a File that has failed never returns a cached block, even one that was
// present when the read was scheduled: once the old version's blocks are forgotten, a
// File of the next version under the same key (same size and time) fills them with the
// new object's bytes.
func TestFailedFileNeverReadsTheNextVersionsBlocks(t *testing.T) {
	fx := newFixture(t, 4*testBlock, nil, testOptions())
	// Opened as a listing that gives sizes only (nginx's HTML index) names it: the next
	// version has the same key.
	listed := source.Version{Size: 4 * testBlock}
	old := fx.f.Open("a.bin", listed)
	defer old.Release()
	p := make([]byte, testBlock)
	if _, err := old.Read(context.Background(), p, 0, Owner{Handle: 1}, readahead.Decision{}); err != nil {
		t.Fatal(err)
	}
	fx.mem.ReplacePattern("a.bin", testSeed+1, 4*testBlock)
	old.fail(&source.PathError{Op: "test", Path: "a.bin", Off: -1, Err: source.ErrChanged})
	next := fx.f.Open("a.bin", listed)
	defer next.Release()
	if _, err := next.Read(context.Background(), p, testBlock, Owner{Handle: 2}, readahead.Decision{}); err != nil {
		t.Fatal(err)
	}
	if err := pattern.Verify(testSeed+1, p, testBlock); err != nil {
		t.Fatalf("the next version read: %v", err)
	}
	bb, data, err := old.block(context.Background(), Owner{Handle: 1}, 1, nil, testBlock)
	if err == nil {
		bb.unref()
		t.Fatalf("the failed File read block 1 (%d bytes) from the cache the next version filled", len(data))
	}
	if !errors.Is(err, source.ErrChanged) {
		t.Fatalf("err %v, want ErrChanged", err)
	}
}
