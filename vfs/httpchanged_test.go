package vfs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/faultorigin"
	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/vfs"
)

// An object replaced at an HTTP origin between and during reads: a handle opened before
// gets old bytes or an error wrapping ErrChanged (ESTALE at the FUSE edge), never new
// bytes or a mix; an open after the replace sees only the new object, also across a
// restart on the same cache.

const newSeed = httpSeed + 1000

type changeCase struct {
	name       string
	newSize    int64
	sameSecond bool // the new version's Last-Modified is the old one's: only the ETag differs
	noETags    bool // the origin sends no ETag: only Last-Modified and size tell versions apart
	html       bool // the listing is nginx's HTML: exact sizes, no usable times
	restart    bool // the FS is closed and opened again on its cache between replace and reads
}

func TestHTTPObjectChanged(t *testing.T) {
	cases := []changeCase{
		{name: "same size", newSize: httpSize},
		{name: "larger", newSize: httpSize + 70_000},
		{name: "smaller", newSize: httpSize / 2},
		{name: "same size same second", newSize: httpSize, sameSecond: true},
		{name: "same size no etag", newSize: httpSize, noETags: true},
		{name: "smaller no etag", newSize: httpSize - 1, noETags: true},
		{name: "same size html listing", newSize: httpSize, html: true},
		{name: "same size html listing no etag", newSize: httpSize, html: true, noETags: true},
		{name: "same size restart", newSize: httpSize, restart: true},
		{name: "same size same second restart", newSize: httpSize, sameSecond: true, restart: true},
		{name: "larger restart", newSize: 2 * httpSize, restart: true},
		{name: "same size html listing restart", newSize: httpSize, html: true, restart: true},
		{name: "same size html listing no etag restart", newSize: httpSize, html: true, noETags: true, restart: true},
	}
	var oldReads, oldErrs, newReads int
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, e, n := runChangeCase(t, c)
			oldReads, oldErrs, newReads = oldReads+o, oldErrs+e, newReads+n
		})
	}
	figure(t, "%d cases, %d reads of old handles (%d failed with ErrChanged, the rest old bytes), %d reads of new opens all new bytes, 0 mixes",
		len(cases), oldReads, oldErrs, newReads)
}

// sameKey reports a replacement the cache key cannot see: same size, and a time that is
// the same to the second or not in the listing at all.
func (c changeCase) sameKey() bool {
	return c.newSize == httpSize && (c.sameSecond || c.html)
}

func runChangeCase(t *testing.T, c changeCase) (oldReads, oldErrs, newReads int) {
	origin := faultorigin.New()
	t.Cleanup(origin.Close)
	origin.SetNoETags(c.noETags)
	origin.SetHTMLListing(c.html)
	origin.Put("a.bin", httpSeed, httpSize, mtime)
	fsys := newHTTPFS(t, origin, 5*time.Second, 256<<20)
	old := open(t, fsys, "a.bin")
	// Stream the first 640 KiB, so read-ahead has ranges in flight when the file changes.
	for off := int64(0); off < 640<<10; off += 64 << 10 {
		if err := readCheck(t, old, httpSeed, off, 64<<10); err != nil {
			t.Fatal(err)
		}
	}
	newTime := mtime.Add(time.Hour)
	if c.sameSecond {
		newTime = mtime.Add(300 * time.Millisecond) // HTTP dates keep whole seconds
	}
	if c.restart {
		old.Close()
		dir := fsys.Options().Cache.Dir
		fsys.Close()
		origin.Put("a.bin", newSeed, c.newSize, newTime)
		fsys = reopenHTTPFS(t, fsys, dir)
	} else {
		origin.Put("a.bin", newSeed, c.newSize, newTime)
		// The old handle: every read is old bytes, or ErrChanged with old bytes before it.
		changed := false
		for off := int64(0); off < httpSize; off += 100_000 {
			p := make([]byte, 100_000)
			k, err := old.ReadAt(p, off)
			oldReads++
			if verr := pattern.Verify(httpSeed, p[:k], off); verr != nil {
				t.Fatalf("old handle at %d after the replace: %d bytes not of the old version (err %v): %v", off, k, err, verr)
			}
			// After ErrChanged, reads of blocks cached before may still succeed: they are
			// the old version's bytes, which the check above proved.
			switch {
			case err == nil || err == io.EOF:
			case errors.Is(err, source.ErrChanged):
				changed = true
				oldErrs++
			default:
				t.Fatalf("old handle at %d: %v, want old bytes or ErrChanged", off, err)
			}
		}
		if !changed {
			t.Fatalf("old handle read the whole file after a replace without ErrChanged")
		}
	}
	// A new open sees the new object only. When the change cannot be seen without asking
	// the origin (the cache key, size and time, is the same), the first open may fail as
	// changed (after a restart, at its first read, when the origin is asked; within a
	// run, where the cache ends, having read only old bytes), and the open after it must
	// be the new one.
	for attempt := 0; ; attempt++ {
		f := open(t, fsys, "a.bin")
		seed, err := readAllOneVersion(t, f, &newReads)
		if c.restart && seed == httpSeed {
			// The first read after a restart checks cached blocks with the origin
			// (fetch/revalidate.go): not one old byte after a restart.
			t.Fatalf("open after a restart read the old version from the cache (then %v)", err)
		}
		if seed == newSeed && err == nil {
			if f.Size() != c.newSize {
				t.Fatalf("new open: size %d, want %d", f.Size(), c.newSize)
			}
			break
		}
		if !c.sameKey() || attempt > 0 || !errors.Is(err, source.ErrChanged) {
			t.Fatalf("new open (attempt %d): version seed %d, %v; want the new version", attempt+1, seed, err)
		}
		t.Logf("first open after a replace the cache key cannot see (seed %d read): %v", seed, err)
	}
	return oldReads, oldErrs, newReads
}

// readAllOneVersion reads f in order in 100 000-byte pieces and returns which version
// (pattern seed) its bytes are and the first error. Bytes of both versions in one
// handle fail the test.
func readAllOneVersion(t *testing.T, f *vfs.File, reads *int) (seed uint64, err error) {
	t.Helper()
	for off := int64(0); off < f.Size(); off += 100_000 {
		p := make([]byte, 100_000)
		k, err := f.ReadAt(p, off)
		*reads++
		if k > 0 {
			if seed == 0 {
				seed = newSeed
				if pattern.Verify(newSeed, p[:k], off) != nil {
					seed = httpSeed
				}
			}
			if verr := pattern.Verify(seed, p[:k], off); verr != nil {
				t.Fatalf("open at %d: %d bytes, not all of version %d (err %v): %v", off, k, seed, err, verr)
			}
		}
		if err != nil && err != io.EOF {
			return seed, err
		}
		if want := min(100_000, f.Size()-off); int64(k) != want {
			t.Fatalf("open at %d: %d bytes, want %d", off, k, want)
		}
	}
	return seed, nil
}

// reopenHTTPFS opens a FS with old's options and source on the cache dir old used.
func reopenHTTPFS(t *testing.T, old *vfs.FS, dir string) *vfs.FS {
	t.Helper()
	opts := old.Options()
	opts.Cache.Dir = dir
	fsys, err := vfs.New(old.Source(), opts)
	if err != nil {
		t.Fatal(fmt.Errorf("reopen: %w", err))
	}
	t.Cleanup(func() { fsys.Close() })
	if _, err := fsys.Stat(context.Background(), "a.bin"); err != nil {
		t.Fatal(err)
	}
	return fsys
}
