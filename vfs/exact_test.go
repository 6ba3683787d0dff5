package vfs_test

import (
	"context"
	"testing"
	"time"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
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

// Past the listing TTL, an Open asks the origin whether the version it holds is still
// the object's (a stat) before trusting its cached blocks; an OpenExact, a peer's read of
// a version it names, does not: its reader checked the version itself, and the peer
// server serves that version only.
func TestOpenExactIsNotCheckedByAge(t *testing.T) {
	const size = 2 << 20
	mem := memsrc.New()
	mem.AddPattern("a.bin", seed, size)
	opts := vfs.DefaultOptions()
	opts.Cache.Dir, opts.ListTTL = t.TempDir(), 20*time.Millisecond
	fsys, err := vfs.New(mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close(); settleDir(t, opts.Cache.Dir) })
	ctx := context.Background()
	readWhole := func(open func() (*vfs.File, error)) {
		t.Helper()
		f, err := open()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := readAtVerify(f, seed, 0, size); err != nil {
			t.Fatal(err)
		}
	}
	readWhole(func() (*vfs.File, error) { return fsys.Open(ctx, "a.bin") })
	whole := source.Range{Off: 0, Len: size}
	for _, c := range []struct {
		name  string
		open  func() (*vfs.File, error)
		stats int64
	}{
		{"OpenExact", func() (*vfs.File, error) { return fsys.OpenExact(ctx, "a.bin", whole) }, 0},
		{"Open", func() (*vfs.File, error) { return fsys.Open(ctx, "a.bin") }, 1},
	} {
		time.Sleep(2 * opts.ListTTL)
		mem.ResetStats()
		readWhole(c.open)
		if st := mem.Stats(); st.Stats != c.stats || st.BytesServed != 0 {
			t.Errorf("%s past the listing TTL: %d stats and %d bytes from the origin; want %d stats, no bytes", c.name, st.Stats, st.BytesServed, c.stats)
		}
	}
}

// Past the listing TTL, an OpenExact does not wait for the directory's listing: it
// takes the version from the expired one at once, and one listing goes out in the
// background to replace it. An Open waits for a fresh listing.
func TestOpenExactUsesAnExpiredListing(t *testing.T) {
	const size, lat = 1 << 20, 200 * time.Millisecond
	mem := memsrc.New()
	mem.AddPattern("d/a.bin", seed, size)
	opts := vfs.DefaultOptions()
	opts.Cache.Dir, opts.ListTTL = t.TempDir(), 20*time.Millisecond
	fsys, err := vfs.New(memsrc.WithLatency(mem, lat), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close(); settleDir(t, opts.Cache.Dir) })
	ctx := context.Background()
	if _, err := fsys.Stat(ctx, "d/a.bin"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * opts.ListTTL)
	mem.ResetStats()
	start := time.Now()
	f, err := fsys.OpenExact(ctx, "d/a.bin", source.Range{Off: 0, Len: size})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if took := time.Since(start); took >= lat {
		t.Errorf("OpenExact past the TTL took %v: it waited for the listing (%v)", took, lat)
	}
	deadline := time.Now().Add(5 * time.Second)
	for mem.Stats().Lists == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := mem.Stats().Lists; n != 1 {
		t.Errorf("%d listings in the background after an OpenExact past the TTL, want 1", n)
	}
	time.Sleep(2 * opts.ListTTL)
	start = time.Now()
	if f, err = fsys.Open(ctx, "d/a.bin"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if took := time.Since(start); took < lat {
		t.Errorf("Open past the TTL took %v: it did not wait for a fresh listing (%v)", took, lat)
	}
}
