package sourcetest

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Dir is an origin kept in a local directory, for the fixtures of every backend that
// serves one (localsrc, Go's http.FileServer, nginx).
//
// Put writes a new file beside the tree and renames it over the old one, as tools that
// update files do, so no reader sees a half-written file. Every Put gets a later
// modification time than the one before it, in whole seconds (HTTP's Last-Modified has
// no finer precision): there the version is size and mtime, and a same-size replacement
// written within the same second must still be a new version. Delete removes the
// directories it leaves empty, so the tree behaves like an object store's keys.
type Dir struct {
	Root    string // the directory the source serves
	scratch string // where Put writes before renaming into Root (same file system)

	mu  sync.Mutex // guards gen
	gen int        // Puts so far
}

// dirEpoch is the modification time of the first Put; each later Put is a second later.
var dirEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// NewDir returns an empty Dir under t's temporary directory, removed when t ends.
func NewDir(t testing.TB) *Dir {
	t.Helper()
	base := t.TempDir()
	d := &Dir{Root: filepath.Join(base, "origin"), scratch: filepath.Join(base, "scratch")}
	for _, dir := range []string{d.Root, d.scratch} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// Put implements Fixture.Put.
func (d *Dir) Put(t testing.TB, p string, data []byte) {
	t.Helper()
	if !fs.ValidPath(p) || p == "." {
		t.Fatalf("Dir.Put: invalid path %q", p)
	}
	d.mu.Lock()
	mtime := dirEpoch.Add(time.Duration(d.gen) * time.Second)
	d.gen++
	d.mu.Unlock()
	dst := filepath.Join(d.Root, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(d.scratch, "put-*")
	if err != nil {
		t.Fatal(err)
	}
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Chmod(0o644), f.Close()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(f.Name(), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		t.Fatal(err)
	}
}

// Delete implements Fixture.Delete: it removes the file and the directories it leaves
// empty.
func (d *Dir) Delete(t testing.TB, p string) {
	t.Helper()
	if err := os.Remove(filepath.Join(d.Root, filepath.FromSlash(p))); err != nil {
		t.Fatal(err)
	}
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if os.Remove(filepath.Join(d.Root, filepath.FromSlash(dir))) != nil {
			break // not empty
		}
	}
}
