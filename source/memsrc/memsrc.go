// Package memsrc is an in-memory source.Source plus wrappers that make any source slow,
// narrow or faulty. It is the fake the fetcher, cache and FUSE tests run against: every
// byte is known (plain bytes or an internal/pattern file of any size without allocating
// it), every call is counted, and every fault replays.
//
// Design notes and traps:
//   - Objects are immutable. Replace swaps in a new object with a new version (ModTime and
//     ETag), so a body opened before a Replace keeps serving the old bytes, as an HTTP
//     response already in flight would. A later OpenRange that still asks for the old
//     version gets ErrChanged.
//   - Versions are deterministic: ModTime is a fixed epoch plus one second per version and
//     the ETag names the version number, so runs compare equal.
//   - Directories are implied by file paths; there are no empty directories.
//   - A body is tied to the ctx given to OpenRange (as an HTTP response is to its request):
//     once ctx is done, Read fails. Close cancels that tie, so a Read blocked in a wrapper
//     (token bucket, injected hang) returns promptly when another goroutine closes the body.
//   - Wrappers use real time, not an injected clock; keep durations in tests small and
//     assert with tolerances.
//   - Add and the other setters panic on an invalid path: they are test setup, and a typo
//     should stop the test at the line that made it.
package memsrc

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/playhead/playhead/source"
)

// epoch is the ModTime of version 0. A fixed date keeps versions equal across runs.
var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// rootName is the Entry.Name of the root directory (Stat("")).
const rootName = "."

// Stats counts calls to a Source. Opens counts every OpenRange call (failed ones too);
// BytesServed counts bytes actually returned by bodies' Read.
type Stats struct {
	Opens, BytesServed, Lists, Stats int64
}

// Source is an in-memory origin. The zero value is not usable; call New.
type Source struct {
	hideSizes atomic.Bool // List reports Size -1, as an HTML listing without sizes does

	opens, bytesServed, lists, stats atomic.Int64

	mu      sync.RWMutex       // guards the fields below
	files   map[string]*object // path → current object
	nextGen int64              // version number given to the next object
}

// object is one immutable version of a file.
type object struct {
	data    []byte // contents, unless pattern
	pattern bool   // contents are pattern.Byte(seed, off)
	seed    uint64
	version source.Version
}

// New returns an empty source.
func New() *Source {
	return &Source{files: make(map[string]*object)}
}

var _ source.Source = (*Source)(nil)

// Add stores data at path (replacing any file there) as a new version. The source keeps
// data; do not modify it afterwards.
func (s *Source) Add(path string, data []byte) {
	s.put(path, &object{data: data, version: source.Version{Size: int64(len(data))}}, false)
}

// AddPattern stores a pattern file of size bytes at path: the byte at offset off is
// pattern.Byte(seed, off). Nothing of size is allocated.
func (s *Source) AddPattern(path string, seed uint64, size int64) {
	if size < 0 {
		panic(fmt.Sprintf("memsrc: negative size %d for %q", size, path))
	}
	s.put(path, &object{pattern: true, seed: seed, version: source.Version{Size: size}}, false)
}

// Replace stores new contents at an existing path, with a new version (ModTime one second
// later than any before, new ETag). It panics if there is no file at path.
func (s *Source) Replace(path string, data []byte) {
	s.put(path, &object{data: data, version: source.Version{Size: int64(len(data))}}, true)
}

// ReplacePattern is Replace with pattern contents.
func (s *Source) ReplacePattern(path string, seed uint64, size int64) {
	s.put(path, &object{pattern: true, seed: seed, version: source.Version{Size: size}}, true)
}

// Remove deletes the file at path; removing a missing file does nothing.
func (s *Source) Remove(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.files, path)
}

// Version returns the current version of the file at path, and whether there is one.
func (s *Source) Version(path string) (source.Version, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o, ok := s.files[path]
	if !ok {
		return source.AnyVersion, false
	}
	return o.version, true
}

// HideListSizes makes List report Size -1 for every file (as a listing without sizes
// does), so callers must Stat; Stat still reports the size.
func (s *Source) HideListSizes(hide bool) { s.hideSizes.Store(hide) }

// Stats returns the call counters.
func (s *Source) Stats() Stats {
	return Stats{
		Opens:       s.opens.Load(),
		BytesServed: s.bytesServed.Load(),
		Lists:       s.lists.Load(),
		Stats:       s.stats.Load(),
	}
}

// ResetStats zeroes the call counters.
func (s *Source) ResetStats() {
	s.opens.Store(0)
	s.bytesServed.Store(0)
	s.lists.Store(0)
	s.stats.Store(0)
}

func (s *Source) put(path string, o *object, mustExist bool) {
	if !fs.ValidPath(path) || path == "." {
		panic(fmt.Sprintf("memsrc: invalid path %q", path))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.files[path]; mustExist && !ok {
		panic(fmt.Sprintf("memsrc: Replace of missing file %q", path))
	}
	if s.isDirLocked(path) {
		panic(fmt.Sprintf("memsrc: %q is a directory", path))
	}
	for dir := parent(path); dir != ""; dir = parent(dir) {
		if _, ok := s.files[dir]; ok {
			panic(fmt.Sprintf("memsrc: %q: parent %q is a file", path, dir))
		}
	}
	gen := s.nextGen
	s.nextGen++
	o.version.ModTime = epoch.Add(time.Duration(gen) * time.Second)
	o.version.ETag = fmt.Sprintf(`"mem-%d"`, gen)
	s.files[path] = o
}

func parent(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i]
	}
	return ""
}

// isDirLocked reports whether some file lies under dir. s.mu must be held.
func (s *Source) isDirLocked(dir string) bool {
	if dir == "" {
		return true
	}
	prefix := dir + "/"
	for p := range s.files {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

func dirEntry(name string) source.Entry {
	return source.Entry{Name: name, IsDir: true, Version: source.AnyVersion}
}

func baseName(path string) string {
	if path == "" {
		return rootName
	}
	return path[strings.LastIndexByte(path, '/')+1:]
}

// Stat implements source.Source.
func (s *Source) Stat(ctx context.Context, path string) (source.Entry, error) {
	s.stats.Add(1)
	if err := ctx.Err(); err != nil {
		return source.Entry{}, &source.PathError{Op: "stat", Path: path, Off: -1, Err: err}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if o, ok := s.files[path]; ok {
		return source.Entry{Name: baseName(path), Version: o.version}, nil
	}
	if s.isDirLocked(path) {
		return dirEntry(baseName(path)), nil
	}
	return source.Entry{}, &source.PathError{Op: "stat", Path: path, Off: -1, Err: source.ErrNotFound}
}

// List implements source.Source.
func (s *Source) List(ctx context.Context, path string) ([]source.Entry, error) {
	s.lists.Add(1)
	if err := ctx.Err(); err != nil {
		return nil, &source.PathError{Op: "list", Path: path, Off: -1, Err: err}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, ok := s.files[path]; ok {
		return nil, &source.PathError{Op: "list", Path: path, Off: -1, Err: source.ErrNotDir}
	}
	prefix := ""
	if path != "" {
		prefix = path + "/"
	}
	var out []source.Entry
	seenDir := make(map[string]bool)
	for p, o := range s.files {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		if name, _, isDir := strings.Cut(rest, "/"); isDir {
			if !seenDir[name] {
				seenDir[name] = true
				out = append(out, dirEntry(name))
			}
			continue
		}
		v := o.version
		if s.hideSizes.Load() {
			v.Size = -1
		}
		out = append(out, source.Entry{Name: rest, Version: v})
	}
	if len(out) == 0 && path != "" {
		return nil, &source.PathError{Op: "list", Path: path, Off: -1, Err: source.ErrNotFound}
	}
	return out, nil
}

// errIsDir is returned when a directory is opened as a file: there is no file at that
// path, which is permanent.
var errIsDir = fmt.Errorf("%w: a directory, not a file", source.ErrNotFound)

// OpenRange implements source.Source. A range starting at or past the end of the file
// gives a body that is at EOF at once (as an HTTP origin's 416 does).
func (s *Source) OpenRange(ctx context.Context, path string, r source.Range, want source.Version) (source.Body, error) {
	s.opens.Add(1)
	fail := func(err error) (source.Body, error) {
		return nil, &source.PathError{Op: "open", Path: path, Off: r.Off, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if r.Off < 0 {
		return fail(fmt.Errorf("negative offset"))
	}
	s.mu.RLock()
	o, ok := s.files[path]
	isDir := !ok && s.isDirLocked(path)
	s.mu.RUnlock()
	switch {
	case isDir:
		return fail(errIsDir)
	case !ok:
		return fail(source.ErrNotFound)
	case !want.Matches(o.version):
		return fail(fmt.Errorf("%w: want %v, have %v", source.ErrChanged, want, o.version))
	}
	end := o.version.Size
	if r.Len >= 0 && r.Off+r.Len < end {
		end = r.Off + r.Len
	}
	if end < r.Off {
		end = r.Off
	}
	return &body{src: s, obj: o, path: path, pos: r.Off, end: end, ctx: ctx}, nil
}

// String implements source.Source.
func (s *Source) String() string { return "mem:" }
