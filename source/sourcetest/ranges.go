package sourcetest

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
)

// rangeSize is the size of the file ranges are read from: over a MiB, so a range can
// be larger than any one read or transport buffer, and not a multiple of 8, so the
// last word of the pattern is partial.
const rangeSize = 1<<20 + 13

// rangeFile is a file of the range subtests: its path, pattern seed, size and the version
// Stat gave.
type rangeFile struct {
	path    string
	seed    uint64
	size    int64
	version source.Version
}

// putRangeFile writes a pattern file of size bytes at p and stats it.
func (e *env) putRangeFile(p string, size int) rangeFile {
	e.t.Helper()
	seed := seedOf(p, 0)
	e.put(p, seed, size)
	e.settle()
	ent := e.stat(p)
	if ent.Version.Size != int64(size) {
		e.t.Fatalf("Stat(%q): size %d, want %d", p, ent.Version.Size, size)
	}
	return rangeFile{path: p, seed: seed, size: int64(size), version: ent.Version}
}

// checkRange opens r of f asking for want, reads it with reads of bufSize bytes and
// checks the body: exactly the bytes of the range (cut at the end of the file), then
// io.EOF, again on the next Read; a version that matches Stat's. It reports failures as
// errors, so it can run in other goroutines.
func checkRange(e *env, f rangeFile, r source.Range, want source.Version, bufSize int) error {
	what := fmt.Sprintf("OpenRange(%q, off %d len %d)", f.path, r.Off, r.Len)
	b, err := e.src.OpenRange(e.ctx, f.path, r, want)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer b.Close()
	wantLen := expectLen(r, f.size)
	got, err := readBody(b, bufSize, wantLen)
	var errs []error
	if err != io.EOF {
		errs = append(errs, fmt.Errorf("%s: after %d bytes of %d the body ended with %v, want io.EOF", what, len(got), wantLen, err))
	}
	if int64(len(got)) != wantLen {
		errs = append(errs, fmt.Errorf("%s: %d bytes, want %d", what, len(got), wantLen))
	}
	if err := pattern.Verify(f.seed, got, r.Off); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", what, err))
	}
	if err == io.EOF {
		if n, err := b.Read(make([]byte, 16)); n != 0 || err != io.EOF {
			errs = append(errs, fmt.Errorf("%s: Read after io.EOF = %d, %v; want 0, io.EOF", what, n, err))
		}
	}
	if v := b.Version(); !v.Matches(f.version) {
		errs = append(errs, fmt.Errorf("%s: body version %v does not match Stat's %v", what, v, f.version))
	} else if wantLen > 0 && (v == source.Version{} || v == source.AnyVersion) {
		errs = append(errs, fmt.Errorf("%s: body of %d bytes tells nothing of its version (%v)", what, wantLen, v))
	}
	if err := b.Close(); err != nil {
		errs = append(errs, fmt.Errorf("%s: Close after reading to the end: %w", what, err))
	}
	return errors.Join(errs...)
}

// Ranges: a range at every edge of a file, asked with the version Stat gave and with any
// version, serves exactly its bytes and then io.EOF: the first byte, the middle, the
// last byte, a range running past the end (cut there), ranges starting at and past the
// end (empty), zero-length ranges, open-ended ranges, and the same of an empty file.
func testRanges(e *env) {
	f := e.putRangeFile("r/range.bin", rangeSize)
	empty := e.putRangeFile("r/empty.bin", 0)
	s := f.size
	cases := []struct {
		f rangeFile
		r source.Range
	}{
		{f, source.Range{Off: 0, Len: 1}},
		{f, source.Range{Off: 0, Len: 8}},
		{f, source.Range{Off: 1, Len: 7}},
		{f, source.Range{Off: s/2 - 7, Len: 4096 + 3}},
		{f, source.Range{Off: s - 1, Len: 1}},
		{f, source.Range{Off: s - 1, Len: -1}},
		{f, source.Range{Off: s - 100, Len: 100}},     // up to the end exactly
		{f, source.Range{Off: s - 10, Len: 100}},      // past the end: cut
		{f, source.Range{Off: 0, Len: s + 1}},         // the whole file and one byte more
		{f, source.Range{Off: 0, Len: s}},             // the whole file
		{f, source.Range{Off: s, Len: 10}},            // at the end: empty
		{f, source.Range{Off: s, Len: -1}},            // at the end, open-ended: empty
		{f, source.Range{Off: s + 100, Len: 10}},      // past the end: empty
		{f, source.Range{Off: s + 100, Len: -1}},      // past the end, open-ended: empty
		{f, source.Range{Off: 5, Len: 0}},             // zero length
		{f, source.Range{Off: s, Len: 0}},             // zero length at the end
		{f, source.Range{Off: 0, Len: -1}},            // open-ended, whole file
		{f, source.Range{Off: s/2 + 3, Len: -1}},      // open-ended from the middle
		{f, source.Range{Off: 1 << 20, Len: 1 << 20}}, // across the end from a round offset
		{empty, source.Range{Off: 0, Len: -1}},
		{empty, source.Range{Off: 0, Len: 10}},
		{empty, source.Range{Off: 0, Len: 0}},
		{empty, source.Range{Off: 10, Len: 10}},
	}
	for _, c := range cases {
		for _, want := range []source.Version{c.f.version, source.AnyVersion} {
			if err := checkRange(e, c.f, c.r, want, 64<<10); err != nil {
				e.t.Errorf("want version %v: %v", want, err)
			}
		}
	}
	b, err := e.src.OpenRange(e.ctx, f.path, source.Range{Off: -1, Len: 10}, source.AnyVersion)
	if b != nil {
		b.Close()
	}
	checkPathErr(e.t, "OpenRange at a negative offset", err, f.path)
}

// ReadSizes: one range read a byte at a time, in odd-sized reads, and a whole file in
// reads larger than it, all bring the same bytes.
func testReadSizes(e *env) {
	f := e.putRangeFile("sizes.bin", rangeSize)
	for _, c := range []struct {
		r   source.Range
		buf int
	}{
		{source.Range{Off: 4093, Len: 300}, 1},
		{source.Range{Off: f.size - 50, Len: -1}, 1},
		{source.Range{Off: 12345, Len: 100_000}, 4093},
		{source.Range{Off: 0, Len: -1}, 4 << 20},
		{source.Range{Off: 0, Len: f.size}, int(f.size)},
		{source.Range{Off: 3, Len: -1}, 1<<20 + 7},
	} {
		if err := checkRange(e, f, c.r, f.version, c.buf); err != nil {
			e.t.Errorf("reads of %d bytes: %v", c.buf, err)
		}
	}
}

// closeWait bounds how long a Read may take to return once its body is closed from
// another goroutine.
const closeWait = 10 * time.Second

// Close: a body closed early, before reading anything or midway, may be closed again;
// a Read after Close fails with an error naming the path and serves nothing; a Close
// from another goroutine ends a reader promptly. The source still serves afterwards.
func testClose(e *env) {
	f := e.putRangeFile("close.bin", rangeSize)
	open := func() source.Body {
		e.t.Helper()
		b, err := e.src.OpenRange(e.ctx, f.path, source.Range{Off: 0, Len: -1}, f.version)
		if err != nil {
			e.t.Fatalf("OpenRange(%q): %v", f.path, err)
		}
		return b
	}

	b := open() // closed before any Read
	b.Close()
	b.Close()

	b = open() // closed midway
	buf := make([]byte, 1000)
	if n, err := io.ReadFull(b, buf); err != nil {
		e.t.Fatalf("reading %d bytes of %q: %d, %v", len(buf), f.path, n, err)
	}
	if err := pattern.Verify(f.seed, buf, 0); err != nil {
		e.t.Error(err)
	}
	b.Close()
	b.Close()
	n, err := b.Read(buf)
	if n != 0 {
		e.t.Errorf("Read after Close served %d bytes", n)
	}
	if err == io.EOF || err == nil {
		e.t.Errorf("Read after Close (of a body not read to its end) = %d, %v; want an error", n, err)
	} else {
		checkPathErr(e.t, "Read after Close", err, f.path)
	}

	// Close from another goroutine while a reader reads: the reader ends promptly,
	// having read only right bytes.
	b = open()
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var off int64
		buf := make([]byte, 4096)
		for {
			n, err := b.Read(buf)
			if err := pattern.Verify(f.seed, buf[:n], off); err != nil {
				done <- err
				return
			}
			if off == 0 && n > 0 {
				close(started)
			}
			off += int64(n)
			if err != nil {
				done <- nil // io.EOF if the reader won the race, an error if Close did
				return
			}
		}
	}()
	select {
	case <-started:
	case err := <-done:
		e.t.Fatalf("reader ended before its first byte: %v", err)
	case <-time.After(closeWait):
		e.t.Fatalf("no byte of %q within %v", f.path, closeWait)
	}
	b.Close()
	select {
	case err := <-done:
		if err != nil {
			e.t.Error(err)
		}
	case <-time.After(closeWait):
		e.t.Fatalf("Read still running %v after Close from another goroutine", closeWait)
	}

	// The source still serves.
	if err := checkRange(e, f, source.Range{Off: 100, Len: 1000}, f.version, 4096); err != nil {
		e.t.Errorf("after the closed bodies: %v", err)
	}
}

// ParallelRanges: many ranges of one file read at the same time, through many bodies
// open together, each serve their own bytes.
func testParallelRanges(e *env) {
	f := e.putRangeFile("parallel.bin", rangeSize)
	const readers, each = 8, 6
	var wg sync.WaitGroup
	errs := make(chan error, readers*each)
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for range each {
				r := source.Range{Off: rng.Int64N(f.size), Len: rng.Int64N(200 << 10)}
				if rng.IntN(4) == 0 {
					r.Len = -1
				}
				if err := checkRange(e, f, r, f.version, 1+rng.IntN(64<<10)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Error(err)
	}
}
