package vfs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// When the origin replaces an object under an open File, that File's reads give old
// bytes or an error wrapping source.ErrChanged, never new bytes; a new Open sees the new
// object.
func TestChangedObject(t *testing.T) {
	const (
		size    = 16 << 20
		newSeed = seed + 100
		probe   = 64 << 10
	)
	mem := memsrc.New()
	mem.AddPattern("a.bin", seed, size)
	fsys := newFS(t, memsrc.WithLatency(mem, rtt))
	old := open(t, fsys, "a.bin")
	if err := readAtVerify(old, seed, 0, probe); err != nil {
		t.Fatal(err)
	}
	// Same size, new bytes and version: only the ETag and mtime tell them apart.
	mem.ReplacePattern("a.bin", newSeed, size)

	// Far past anything read-ahead or read-through could have fetched before the
	// replace, and before the tail the first read fetched beside it: this block must
	// come from the origin, which now has another version.
	p := make([]byte, probe)
	far := int64(size / 2)
	n, err := old.ReadAt(p, far)
	if !errors.Is(err, source.ErrChanged) {
		t.Fatalf("read of an uncached block after the replace: %d bytes, %v; want ErrChanged", n, err)
	}
	if err := pattern.Verify(seed, p[:n], far); err != nil {
		t.Fatalf("bytes returned with the error are not the old version's: %v", err)
	}
	// Every other read of the old File: old bytes or ErrChanged, never anything else.
	for _, off := range []int64{0, 1 << 20, 8 << 20, size - 1} {
		n, err := old.ReadAt(p, off)
		if err != nil && !errors.Is(err, source.ErrChanged) {
			t.Errorf("old File at %d: %v, want old bytes or ErrChanged", off, err)
		}
		if verr := pattern.Verify(seed, p[:n], off); verr != nil {
			t.Errorf("old File at %d returned bytes of another version: %v", off, verr)
		}
	}

	fresh := open(t, fsys, "a.bin")
	for _, off := range []int64{0, size / 2, size - probe} {
		if err := readAtVerify(fresh, newSeed, off, probe); err != nil {
			t.Errorf("new Open after the replace: %v", err)
		}
	}
	if _, err := fsys.Stat(context.Background(), "a.bin"); err != nil {
		t.Fatal(err)
	}
}
