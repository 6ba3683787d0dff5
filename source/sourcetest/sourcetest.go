// Package sourcetest is the conformance suite of source.Source: the same tests run
// against every backend (local directory, HTTP servers, object stores, the in-memory
// fake), so they all keep the contract written in package source. Only tests import it.
//
// A backend's test builds a Fixture (the source under test plus a way to write its
// origin) and calls Run:
//
//	func TestConformance(t *testing.T) {
//		sourcetest.Run(t, func(t *testing.T) *sourcetest.Fixture {
//			d := sourcetest.NewDir(t)
//			src, err := localsrc.New(d.Root)
//			...
//			return &sourcetest.Fixture{Source: src, Put: d.Put, Delete: d.Delete, ...}
//		})
//	}
//
// Design notes and traps:
//   - Every subtest gets a fresh fixture (an empty directory, bucket or server), writes the
//     files it needs through Put, and checks every byte it reads against a deterministic
//     pattern (internal/pattern), so a byte served from the wrong offset or the wrong
//     version is caught.
//   - The origin is a flat set of files, as an object store is: there are no empty
//     directories, and a directory exists while some file's path has it as a prefix.
//     Put creates parents as needed; fixtures over a real directory (Dir) also remove
//     directories that a Delete leaves empty.
//   - A fault the backend cannot produce is not skipped silently: its subtest logs
//     "not applicable: <reason>" and passes, so the reason shows in -v output.
//   - Every call is bounded by a context (opTimeout); a backend that hangs fails the
//     subtest instead of hanging the test binary.
package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
)

// Fixture is what a backend's test gives the suite.
type Fixture struct {
	// Source is the source under test, reading the origin that Put writes. Its root is
	// the root of the paths Put takes.
	Source source.Source
	// Put creates or replaces the file at path (slash-separated, parents created as
	// needed). A replacement must be told apart the way the origin really tells versions
	// apart: a local or HTTP fixture sets a later mtime on a same-size replacement,
	// because the version there is size and mtime (Dir does).
	Put func(t testing.TB, path string, data []byte)
	// Delete removes the file at path.
	Delete func(t testing.TB, path string)
	// Settle, if set, is called after Puts and Deletes, before the suite reads (an origin
	// with caching or eventually consistent listings). Nil means changes show at once.
	Settle func(t testing.TB)

	// Denied returns a source for the same origin that refuses this client (wrong
	// credentials, 403). It may change the origin for every client (a local fixture
	// takes away the file modes): the suite writes nothing after calling it. Nil when
	// the backend cannot produce it, with the reason in NoDenied.
	Denied   func(t testing.TB) source.Source
	NoDenied string
	// Throttled returns a source for the same origin that answers the first n requests
	// with throttling (503 SlowDown, 429, 503 ServerBusy...). Nil when the backend cannot
	// produce it, with the reason in NoThrottle.
	Throttled  func(t testing.TB, n int) source.Source
	NoThrottle string
	// ThrottleMustSucceed says whether every call must still succeed through n throttled
	// answers (an object store whose SDK retries them), or may fail with transient errors
	// (not source.IsPermanent) that the fetcher retries (the HTTP source, which leaves
	// retries to the fetcher). Either way the calls succeed once the origin stops
	// throttling.
	ThrottleMustSucceed bool

	// ListOmitsSizes says the origin's listings give no sizes (Go's http.FileServer), so
	// List may report Size -1 for a file (the contract allows it; Stat gives the size).
	// When false, every file List reports must have its exact size.
	ListOmitsSizes bool
}

// opTimeout bounds each subtest's calls to the source.
const opTimeout = 2 * time.Minute

// Run runs the suite. newFixture is called once per subtest, with that subtest's t, and
// must return a fixture over a fresh, empty origin; it cleans up through t.Cleanup.
func Run(t *testing.T, newFixture func(t *testing.T) *Fixture) {
	for _, c := range []struct {
		name string
		test func(e *env)
	}{
		{"List", testList},
		{"ListMany", testListMany},
		{"Stat", testStat},
		{"Paths", testPaths},
		{"Ranges", testRanges},
		{"ReadSizes", testReadSizes},
		{"Close", testClose},
		{"ParallelRanges", testParallelRanges},
		{"Cancel", testCancel},
		{"VersionChange", testVersionChange},
		{"Delete", testDelete},
		{"Missing", testMissing},
		{"PermissionDenied", testDenied},
		{"Throttling", testThrottling},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			checkFixture(t, f)
			ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
			defer cancel()
			c.test(&env{t: t, f: f, src: f.Source, ctx: ctx})
		})
	}
}

func checkFixture(t *testing.T, f *Fixture) {
	t.Helper()
	switch {
	case f == nil:
		t.Fatal("newFixture returned nil")
	case f.Source == nil || f.Put == nil || f.Delete == nil:
		t.Fatal("fixture needs Source, Put and Delete")
	case f.Denied == nil && f.NoDenied == "":
		t.Fatal("fixture gives neither Denied nor the reason it cannot (NoDenied)")
	case f.Throttled == nil && f.NoThrottle == "":
		t.Fatal("fixture gives neither Throttled nor the reason it cannot (NoThrottle)")
	}
}

// env is one subtest's fixture and context.
type env struct {
	t   *testing.T
	f   *Fixture
	src source.Source
	ctx context.Context
}

// put writes pattern bytes of seed at path and returns them.
func (e *env) put(path string, seed uint64, size int) []byte {
	e.t.Helper()
	data := content(seed, size)
	e.f.Put(e.t, path, data)
	return data
}

// settle lets the origin show the changes made so far.
func (e *env) settle() {
	e.t.Helper()
	if e.f.Settle != nil {
		e.f.Settle(e.t)
	}
}

// content returns size pattern bytes of seed.
func content(seed uint64, size int) []byte {
	data := make([]byte, size)
	pattern.Fill(seed, data, 0)
	return data
}

// seedOf derives a pattern seed from a path and a generation (FNV-1a), so every file
// and every replacement of it has its own bytes.
func seedOf(path string, gen int) uint64 {
	var h uint64 = 1469598103934665603
	for i := 0; i < len(path); i++ {
		h = (h ^ uint64(path[i])) * 1099511628211
	}
	return h ^ uint64(gen)*0x9E3779B97F4A7C15
}

// stat calls Stat and fails the test on error.
func (e *env) stat(path string) source.Entry {
	e.t.Helper()
	ent, err := e.src.Stat(e.ctx, path)
	if err != nil {
		e.t.Fatalf("Stat(%q): %v", path, err)
	}
	return ent
}

// checkErr checks that err is an error of op on path: a *source.PathError naming path,
// wrapping one of targets (any error when none is given), permanent or not as perm says.
func checkErr(t testing.TB, what string, err error, path string, perm bool, targets ...error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %v", what, describe(targets))
		return
	}
	if len(targets) > 0 {
		ok := false
		for _, target := range targets {
			ok = ok || errors.Is(err, target)
		}
		if !ok {
			t.Errorf("%s: error %q does not wrap %v", what, err, describe(targets))
		}
	}
	if got := source.IsPermanent(err); got != perm {
		t.Errorf("%s: error %q: source.IsPermanent = %v, want %v", what, err, got, perm)
	}
	checkPathErr(t, what, err, path)
}

// checkPathErr checks that err is a *source.PathError naming path.
func checkPathErr(t testing.TB, what string, err error, path string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	var pe *source.PathError
	if !errors.As(err, &pe) {
		t.Errorf("%s: error %q (%T) is not a *source.PathError", what, err, err)
	} else if pe.Path != path {
		t.Errorf("%s: PathError names path %q, want %q (error %q)", what, pe.Path, path, err)
	}
}

func describe(targets []error) string {
	if len(targets) == 0 {
		return "an error"
	}
	var s []string
	for _, t := range targets {
		s = append(s, fmt.Sprintf("%q", t))
	}
	return strings.Join(s, " or ")
}

// hasValidator reports whether v can tell versions of one object apart: a known size
// and a modification time or an ETag.
func hasValidator(v source.Version) bool {
	return v.Size >= 0 && (!v.ModTime.IsZero() || v.ETag != "")
}

// notApplicable logs why a fault cannot be produced; the subtest passes.
func notApplicable(t *testing.T, reason string) {
	t.Helper()
	t.Logf("not applicable: %s", reason)
}

// maxZeroReads is how many (0, nil) reads in a row the suite tolerates before calling a
// body stuck: io.Reader discourages them, and a body that only returns them never ends.
const maxZeroReads = 100

// readBody reads b to its end with reads of at most bufSize bytes, stopping after limit
// bytes (a body serving more than it should is caught, not read forever). It returns
// the bytes and the error that ended the reading: io.EOF for a body that ended as it
// should.
func readBody(b io.Reader, bufSize int, limit int64) ([]byte, error) {
	var out []byte
	buf := make([]byte, bufSize)
	zeros := 0
	for int64(len(out)) <= limit {
		n, err := b.Read(buf)
		if n < 0 || n > len(buf) {
			return out, fmt.Errorf("Read returned n=%d for a %d-byte buffer", n, len(buf))
		}
		out = append(out, buf[:n]...)
		if err != nil {
			return out, err
		}
		if n == 0 {
			if zeros++; zeros > maxZeroReads {
				return out, fmt.Errorf("%d reads in a row returned nothing and no error", zeros)
			}
		} else {
			zeros = 0
		}
	}
	return out, fmt.Errorf("body gave more than the %d bytes expected", limit)
}

// expectLen is the length of r of an object of size bytes: cut at the end, zero past it.
func expectLen(r source.Range, size int64) int64 {
	if r.Off >= size {
		return 0
	}
	n := size - r.Off
	if r.Len >= 0 && r.Len < n {
		n = r.Len
	}
	return n
}
