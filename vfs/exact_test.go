package vfs_test

import (
	"context"
	"testing"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// A File opened with OpenExact fetches its range on one request, at the first read, and
// nothing past it: no read-ahead and no tail, however sequential its reads are; a read
// outside the range fetches its own blocks only.
func TestOpenExactFetchesOnlyItsRange(t *testing.T) {
	const (
		size  = 8 << 20
		block = 256 << 10 // vfs.DefaultOptions' block size
		chunk = 64 << 10
	)
	mem := memsrc.New()
	mem.AddPattern("a.bin", seed, size)
	fsys := newFS(t, memsrc.WithLatency(mem, rtt))
	r := source.Range{Off: block + 1000, Len: 3*block + 5000} // blocks 1 to 4
	f, err := fsys.OpenExact(context.Background(), "a.bin", r)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem.ResetStats()
	for off := r.Off; off < r.End(); off += chunk {
		if err := readAtVerify(f, seed, off, int(min(chunk, r.End()-off))); err != nil {
			t.Fatal(err)
		}
	}
	if st := mem.Stats(); st.Opens != 1 || st.BytesServed != 4*block {
		t.Errorf("exact read of blocks 1-4: %d ranges, %d bytes from the origin; want 1 range of %d bytes",
			st.Opens, st.BytesServed, 4*block)
	}
	if err := readAtVerify(f, seed, 6*block+10, 1000); err != nil {
		t.Fatal(err)
	}
	if st := mem.Stats(); st.BytesServed != 5*block {
		t.Errorf("a read outside the range: %d bytes from the origin in all, want %d (its own block)",
			st.BytesServed, 5*block)
	}
	if n := fsys.FetchStats().TailRanges; n != 0 {
		t.Errorf("%d tail ranges, want none", n)
	}
}
