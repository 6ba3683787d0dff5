package sourcetest

import (
	"fmt"
	"io"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
)

// openErr opens r of path asking for want and checks that it fails as checkErr says,
// serving no body.
func (e *env) openErr(what, path string, r source.Range, want source.Version, targets ...error) {
	e.t.Helper()
	b, err := e.src.OpenRange(e.ctx, path, r, want)
	if b != nil {
		got, _ := readBody(b, 64<<10, rangeSize)
		b.Close()
		e.t.Errorf("%s: OpenRange(%q, off %d len %d) served a body (%d bytes)", what, path, r.Off, r.Len, len(got))
	}
	checkErr(e.t, fmt.Sprintf("%s: OpenRange(%q, off %d len %d)", what, path, r.Off, r.Len), err, path, true, targets...)
}

// VersionChange: a file replaced by one of the same size but other bytes is a new
// version. Stat shows a version neither Same as nor matching the old one; a range asked
// with the old version fails with ErrChanged and serves no byte, wherever it lies; a
// range asked with any version, or the new one, serves the new bytes. A body opened
// before the replacement serves old bytes to its end, or fails, but never serves new
// ones. A replacement of another size is a new version too, and listed with its size.
func testVersionChange(e *env) {
	const p = "v/file.bin"
	f := e.putRangeFile(p, rangeSize)
	if err := checkRange(e, f, source.Range{Off: 0, Len: 1000}, f.version, 4096); err != nil {
		e.t.Fatalf("before the change: %v", err)
	}

	// A body opened before the replacement, read partly before and partly after it.
	inFlight, err := e.src.OpenRange(e.ctx, p, source.Range{Off: 0, Len: -1}, f.version)
	if err != nil {
		e.t.Fatalf("OpenRange(%q) before the change: %v", p, err)
	}
	defer inFlight.Close()
	head := make([]byte, 1000)
	if _, err := io.ReadFull(inFlight, head); err != nil {
		e.t.Fatalf("reading %q before the change: %v", p, err)
	}

	e.put(p, seedOf(p, 1), rangeSize)
	e.settle()

	// The body opened before serves the old bytes to its end, or fails: never new bytes.
	rest, err := readBody(inFlight, 64<<10, rangeSize)
	got := append(head, rest...)
	if verr := pattern.Verify(f.seed, got, 0); verr != nil {
		e.t.Errorf("a body opened before a replacement and read after it (old version %v) served other bytes: %v", f.version, verr)
	}
	if err == io.EOF && len(got) != rangeSize {
		e.t.Errorf("a body opened before a replacement ended at %d of %d bytes with io.EOF", len(got), rangeSize)
	}
	if err != io.EOF {
		e.t.Logf("a body opened before a replacement failed after %d bytes (allowed): %v", len(got), err)
	}
	inFlight.Close()

	nf := rangeFile{path: p, seed: seedOf(p, 1), size: rangeSize, version: e.stat(p).Version}
	if nf.version.Same(f.version) {
		e.t.Errorf("after a same-size replacement Stat's version %v is Same as the old %v", nf.version, f.version)
	}
	if nf.version.Matches(f.version) {
		e.t.Errorf("after a same-size replacement Stat's version %v matches the old %v: a range asked with the old version cannot fail", nf.version, f.version)
	}
	if !hasValidator(nf.version) {
		e.t.Errorf("Stat's version %v has no modification time or ETag", nf.version)
	}
	for _, r := range []source.Range{
		{Off: 0, Len: 1000}, {Off: 0, Len: -1}, {Off: rangeSize / 2, Len: 10}, {Off: rangeSize - 10, Len: 100},
		{Off: rangeSize - 1, Len: -1}, {Off: rangeSize, Len: 10}, {Off: rangeSize + 100, Len: -1},
	} {
		e.openErr("same-size replacement, old version", p, r, f.version, source.ErrChanged)
	}
	for _, want := range []source.Version{source.AnyVersion, nf.version} {
		for _, r := range []source.Range{{Off: 0, Len: -1}, {Off: 77, Len: 5000}} {
			if err := checkRange(e, nf, r, want, 64<<10); err != nil {
				e.t.Errorf("after the replacement, want %v: %v", want, err)
			}
		}
	}

	// Another size: one byte more.
	e.put(p, seedOf(p, 2), rangeSize+1)
	e.settle()
	sf := rangeFile{path: p, seed: seedOf(p, 2), size: rangeSize + 1, version: e.stat(p).Version}
	if sf.version.Size != rangeSize+1 {
		e.t.Errorf("after a replacement of %d bytes Stat says %d", rangeSize+1, sf.version.Size)
	}
	e.checkListing("v", map[string]wantEntry{"file.bin": {size: rangeSize + 1}})
	for _, old := range []source.Version{f.version, nf.version} {
		e.openErr("replacement of another size, old version", p, source.Range{Off: 0, Len: 100}, old, source.ErrChanged)
	}
	if err := checkRange(e, sf, source.Range{Off: rangeSize - 5, Len: -1}, sf.version, 64<<10); err != nil {
		e.t.Errorf("after the replacement of another size: %v", err)
	}
}

// Delete: a deleted file is not found by Stat, not listed, and OpenRange fails
// permanently: ErrNotFound, and with the version it had either ErrNotFound or
// ErrChanged (see source.Source.OpenRange). A file put back at the path serves its new
// bytes.
func testDelete(e *env) {
	const p = "d/gone.bin"
	e.put("d/stays.bin", seedOf("d/stays.bin", 0), 10)
	f := e.putRangeFile(p, 5000)
	e.f.Delete(e.t, p)
	e.settle()
	_, err := e.src.Stat(e.ctx, p)
	checkErr(e.t, "Stat of a deleted file", err, p, true, source.ErrNotFound)
	e.checkListing("d", map[string]wantEntry{"stays.bin": {size: 10}})
	e.openErr("deleted, any version", p, source.Range{Off: 0, Len: 100}, source.AnyVersion, source.ErrNotFound)
	e.openErr("deleted, its old version", p, source.Range{Off: 0, Len: 100}, f.version, source.ErrNotFound, source.ErrChanged)

	data := e.put(p, seedOf(p, 1), 3000)
	e.settle()
	nf := rangeFile{path: p, seed: seedOf(p, 1), size: int64(len(data)), version: e.stat(p).Version}
	if err := checkRange(e, nf, source.Range{Off: 0, Len: -1}, nf.version, 4096); err != nil {
		e.t.Errorf("put back after the delete: %v", err)
	}
}
