package integration

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/vfs"
)

// A file replaced at the origin, as a program sees it through the mount: a handle opened
// before the change returns bytes of the old object or fails with ESTALE, never bytes of
// the new one; a handle opened after the change (once the listing TTL has passed, or at
// once with --list-ttl 0) reads only the new object, from byte 0, however many pages of
// the old one the kernel held. Every byte is checked, through nginx's HTML index (sizes
// only: a same-size replacement is invisible to the listing) and its JSON index.

const changedSize = 12 << 20

// changedCase is one listing format and listing TTL.
type changedCase struct {
	name string
	json bool
	ttl  time.Duration // vfs.Options.ListTTL: -1 is --list-ttl 0
}

var changedCases = []changedCase{
	{"html/ttl0", false, -1}, {"json/ttl0", true, -1},
	{"html/ttl1s", false, time.Second}, {"json/ttl1s", true, time.Second},
}

// changedOrigin serves one file, m.bin, with nginx and mounts the chosen index of it.
type changedOrigin struct {
	t   *testing.T
	www string
	m   *mount
	ttl time.Duration
	gen int // replacements so far
}

func startChanged(t *testing.T, c changedCase, seed uint64, size int64) *changedOrigin {
	t.Helper()
	www, htmlURL, jsonURL := startNginxWWW(t, map[string]int64{})
	o := &changedOrigin{t: t, www: www, ttl: c.ttl}
	o.write(seed, size)
	url := htmlURL
	if c.json {
		url = jsonURL
	}
	opts := testOptions(t)
	opts.ListTTL = c.ttl
	o.m = mountHTTP(t, url, opts)
	return o
}

func (o *changedOrigin) path() string { return o.m.Path("m.bin") }

// write puts size pattern bytes of seed at m.bin the way tools replace a file (write a
// new file, rename it over the old one), each generation with its own modification time
// (nginx's ETag is made of the time, to the second, and the size).
func (o *changedOrigin) write(seed uint64, size int64) {
	o.t.Helper()
	tmp := filepath.Join(o.www, ".m.bin.tmp")
	writePatternFile(o.t, tmp, seed, size)
	mt := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(o.gen) * time.Minute)
	if err := os.Chtimes(tmp, mt, mt); err != nil {
		o.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(o.www, "m.bin")); err != nil {
		o.t.Fatal(err)
	}
	o.gen++
}

// replace writes a new version and waits out the listing TTL, after which a new open
// must see it.
func (o *changedOrigin) replace(seed uint64, size int64) {
	o.t.Helper()
	o.write(seed, size)
	if o.ttl > 0 {
		time.Sleep(o.ttl + 100*time.Millisecond)
	}
}

// readOld reads n bytes at off through a handle opened before a change: it must get the
// old bytes or ESTALE. It reports whether the handle still works.
func readOld(t *testing.T, f *os.File, seed uint64, off int64, n int) bool {
	t.Helper()
	p := make([]byte, n)
	got, err := f.ReadAt(p, off)
	if verr := pattern.Verify(seed, p[:got], off); verr != nil {
		t.Fatalf("old handle at %d: %d bytes, not the old object's: %v", off, got, verr)
	}
	switch {
	case err == nil || err == io.EOF:
		return true
	case errors.Is(err, syscall.ESTALE):
		return false
	}
	t.Fatalf("old handle at %d: %v, want old bytes or ESTALE", off, err)
	return false
}

func TestReopenAfterSameSizeChange(t *testing.T) {
	for _, c := range changedCases {
		t.Run(c.name, func(t *testing.T) {
			o := startChanged(t, c, 1, changedSize)
			old := openT(t, o.path())
			readOld(t, old, 1, 0, 8<<20)
			o.replace(2, changedSize)
			readOld(t, old, 1, 10<<20, 1<<20)
			old.Close()
			for range 3 { // each reopen, not only the first, reads only the new object
				verifyWhole(t, o.path(), 2, changedSize)
			}
		})
	}
}

func TestReopenAfterSizeChange(t *testing.T) {
	for _, c := range changedCases {
		t.Run(c.name, func(t *testing.T) {
			o := startChanged(t, c, 1, changedSize)
			verifyWhole(t, o.path(), 1, changedSize)
			o.replace(3, changedSize-(3<<20)+5)
			verifyWhole(t, o.path(), 3, changedSize-(3<<20)+5)
			o.replace(4, changedSize+(1<<20)+7)
			verifyWhole(t, o.path(), 4, changedSize+(1<<20)+7)
		})
	}
}

// TestChangeWhileOldHandleReads: a handle of the old object goes on reading while a new
// handle reads the new one; each gets only its own object's bytes (the old one may get
// ESTALE instead), however the kernel's one page cache per file is shared.
func TestChangeWhileOldHandleReads(t *testing.T) {
	for _, c := range changedCases {
		t.Run(c.name, func(t *testing.T) {
			o := startChanged(t, c, 1, changedSize)
			old := openT(t, o.path())
			readOld(t, old, 1, 0, 4<<20)
			o.replace(2, changedSize)
			fresh := openT(t, o.path())
			// Interleave the two handles, 1 MiB at a time, through the whole file.
			oldWorks := true
			for off := int64(0); off < changedSize; off += 1 << 20 {
				if err := readAtVerify(fresh, 2, changedSize, off, 1<<20); err != nil {
					t.Fatalf("new handle: %v", err)
				}
				if oldWorks {
					oldWorks = readOld(t, old, 1, off, 1<<20)
				}
			}
			t.Logf("old handle still reading at the end: %v", oldWorks)
		})
	}
}

// TestReplacementsInARow: five versions one after the other, each read whole by a new
// open while the previous version's handle is still open.
func TestReplacementsInARow(t *testing.T) {
	for _, c := range changedCases {
		t.Run(c.name, func(t *testing.T) {
			o := startChanged(t, c, 10, changedSize)
			var prev *os.File
			for gen := uint64(11); gen <= 15; gen++ {
				cur := openT(t, o.path())
				if err := readAtVerify(cur, gen-1, changedSize, 0, 2<<20); err != nil {
					t.Fatalf("version %d: %v", gen-1, err)
				}
				if prev != nil {
					prev.Close()
				}
				prev = cur
				o.replace(gen, changedSize)
				verifyWhole(t, o.path(), gen, changedSize)
			}
			prev.Close()
		})
	}
}

// TestChangedWhileUnmounted: a file cached by one run and replaced at the origin before
// the next reads, in the next run's first open, as the new object, with no error.
func TestChangedWhileUnmounted(t *testing.T) {
	for _, c := range changedCases {
		t.Run(c.name, func(t *testing.T) {
			www, htmlURL, jsonURL := startNginxWWW(t, map[string]int64{})
			o := &changedOrigin{t: t, www: www, ttl: c.ttl}
			o.write(1, changedSize)
			url := htmlURL
			if c.json {
				url = jsonURL
			}
			opts := testOptions(t)
			opts.ListTTL = c.ttl
			m := mountHTTP(t, url, opts)
			verifyWhole(t, m.Path("m.bin"), 1, changedSize)
			m.Unmount()
			o.write(2, changedSize)
			m = mountHTTP(t, url, opts)
			verifyWhole(t, m.Path("m.bin"), 2, changedSize)
			o.write(3, changedSize+1)
			if c.ttl > 0 {
				time.Sleep(c.ttl + 100*time.Millisecond)
			}
			m.Unmount()
			m = mountHTTP(t, url, opts)
			verifyWhole(t, m.Path("m.bin"), 3, changedSize+1)
		})
	}
}

// TestChangeDetectedDropsKernelPages: with the default TTL, a change found by a read
// (the origin answers 412 to a range of the old object) drops the kernel's pages of the
// file at once: a reopen does not wait for the TTL to read the new object.
func TestChangeDetectedDropsKernelPages(t *testing.T) {
	www, htmlURL, _ := startNginxWWW(t, map[string]int64{})
	o := &changedOrigin{t: t, www: www}
	o.write(1, changedSize)
	opts := testOptions(t)
	opts.ListTTL = vfs.DefaultListTTL
	opts.ReadAhead.MaxWindow = 1 << 20 // the read at 10 MiB below must reach the origin
	opts.ReadAhead.InitialWindow = 1 << 20
	o.m = mountHTTP(t, htmlURL, opts)
	old := openT(t, o.path())
	readOld(t, old, 1, 0, 2<<20)
	o.write(2, changedSize)
	if readOld(t, old, 1, 10<<20, 256<<10) {
		t.Fatal("old handle read past its cached blocks after a change without ESTALE")
	}
	old.Close()
	verifyWhole(t, o.path(), 2, changedSize)
}

// TestVanishedFile: a file removed at the origin fails its open handle's reads of
// uncached bytes with ESTALE, and a new open with ENOENT.
func TestVanishedFile(t *testing.T) {
	for _, c := range changedCases {
		t.Run(c.name, func(t *testing.T) {
			o := startChanged(t, c, 1, changedSize)
			old := openT(t, o.path())
			readOld(t, old, 1, 0, 64<<10)
			if err := os.Remove(filepath.Join(o.www, "m.bin")); err != nil {
				t.Fatal(err)
			}
			if c.ttl > 0 {
				time.Sleep(c.ttl + 100*time.Millisecond)
			}
			readOld(t, old, 1, changedSize-(64<<10), 64<<10)
			if _, err := os.Open(o.path()); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("open of a removed file: %v, want ENOENT", err)
			}
		})
	}
}

// TestUnreadHandleFollowsChange: a handle that has returned no byte when its file is
// replaced is bound to no version: it reads one version whole, with no error, whether
// the old one is cached (it may serve it) or not (it follows the change).
func TestUnreadHandleFollowsChange(t *testing.T) {
	for _, c := range changedCases {
		for _, cached := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/cached=%v", c.name, cached), func(t *testing.T) {
				o := startChanged(t, c, 1, changedSize)
				if cached {
					verifyWhole(t, o.path(), 1, changedSize)
				}
				f := openT(t, o.path())
				o.replace(2, changedSize)
				seed := uint64(2)
				p := make([]byte, 1<<20)
				if _, err := f.ReadAt(p, 0); err != nil {
					t.Fatalf("first read after the change: %v", err)
				}
				if pattern.Verify(2, p, 0) != nil {
					seed = 1
				}
				if !cached && seed != 2 {
					t.Fatal("a handle with nothing cached read the old version after the change")
				}
				for off := int64(0); off < changedSize; off += 1 << 20 {
					if err := readAtVerify(f, seed, changedSize, off, 1<<20); err != nil {
						t.Fatalf("handle reading version %d: %v", seed, err)
					}
				}
			})
		}
	}
}

// openT opens p for reading and closes it when the test ends (before the unmount, also
// when the test fails: cleanups run in reverse order).
func openT(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
