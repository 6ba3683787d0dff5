package sourcetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/playhead/playhead/source"
)

// listTree is the tree of the List and Stat subtests (path → size). Its traps:
//   - "dir", "dir-2/", "dir.bin": names sharing a prefix, which sort around '/' in an
//     object store's key order ('-' and '.' before '/'), so a prefix listing of "dir/"
//     must keep out "dir-2/z.bin" and "dir.bin";
//   - "a/b/c.bin": the directories "a" and "a/b" exist only through it;
//   - an empty file, a name that needs escaping in a URL and in HTML, one with a colon
//     (a relative link "colon:name.bin" reads as a URL scheme), one longer than an HTML
//     index shows.
var listTree = map[string]int{
	"top.bin":                  100_003,
	"empty":                    0,
	"dir/one.bin":              4097,
	"dir/two.bin":              5,
	"dir-2/z.bin":              10,
	"dir.bin":                  7,
	"a/b/c.bin":                1000,
	oddName:                    33,
	"dir/sub/deep/further.bin": 1,
	"dir/colon:name.bin":       2,
	longName:                   3,
}

// longName is longer than the 50 characters nginx's HTML index shows of a name.
const longName = "a-very-long-file-name-that-an-html-index-may-cut-short-when-it-shows-it.bin"

// oddName needs escaping in a URL path (space, '%', '#', '?', '&', '+', non-ASCII) and
// in HTML ('&').
const oddName = "odd name 100% #1 q?&+ünï.bin"

// putTree writes tree and returns its contents by path.
func (e *env) putTree(tree map[string]int) map[string][]byte {
	e.t.Helper()
	files := make(map[string][]byte, len(tree))
	for _, p := range slices.Sorted(maps.Keys(tree)) {
		files[p] = e.put(p, seedOf(p, 0), tree[p])
	}
	e.settle()
	return files
}

// wantEntry is what a listing must show of one name.
type wantEntry struct {
	isDir bool
	size  int64
}

// childrenOf returns the direct children of dir in a tree (path → size).
func childrenOf(tree map[string]int, dir string) map[string]wantEntry {
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	out := make(map[string]wantEntry)
	for p, size := range tree {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		if name, _, isDir := strings.Cut(rest, "/"); isDir {
			out[name] = wantEntry{isDir: true}
		} else {
			out[rest] = wantEntry{size: int64(size)}
		}
	}
	return out
}

// checkListing lists dir and compares it with want: the same names, each once, files
// and directories as want says, files with their exact size (or -1 where the fixture's
// listings omit sizes). It returns the entries by name.
func (e *env) checkListing(dir string, want map[string]wantEntry) map[string]source.Entry {
	e.t.Helper()
	entries, err := e.src.List(e.ctx, dir)
	if err != nil {
		e.t.Fatalf("List(%q): %v", dir, err)
	}
	got := make(map[string]source.Entry, len(entries))
	for _, ent := range entries {
		if ent.Name == "" || ent.Name == "." || ent.Name == ".." || strings.Contains(ent.Name, "/") {
			e.t.Errorf("List(%q): invalid name %q", dir, ent.Name)
			continue
		}
		if _, dup := got[ent.Name]; dup {
			e.t.Errorf("List(%q): %q listed twice", dir, ent.Name)
		}
		got[ent.Name] = ent
	}
	var missing, extra []string
	for name := range want {
		if _, ok := got[name]; !ok {
			missing = append(missing, name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			extra = append(extra, name)
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		slices.Sort(missing)
		slices.Sort(extra)
		e.t.Errorf("List(%q): %d entries, want %d; missing %s; unexpected %s", dir, len(got), len(want),
			short(missing), short(extra))
	}
	for name, w := range want {
		ent, ok := got[name]
		if !ok {
			continue
		}
		switch {
		case ent.IsDir != w.isDir:
			e.t.Errorf("List(%q): %q IsDir = %v, want %v", dir, name, ent.IsDir, w.isDir)
		case w.isDir:
		case ent.Version.Size == -1 && e.f.ListOmitsSizes:
		case ent.Version.Size != w.size:
			e.t.Errorf("List(%q): %q has size %d, want %d", dir, name, ent.Version.Size, w.size)
		}
	}
	return got
}

// short quotes up to 10 names of a list, for messages about lists of 1,200.
func short(names []string) string {
	if len(names) > 10 {
		return fmt.Sprintf("%q and %d more", names[:10], len(names)-10)
	}
	return fmt.Sprintf("%q", names)
}

// List: every directory of the tree lists its direct children with the right kind and
// size; a file, a missing directory and prefixes that are not directories do not list.
func testList(e *env) {
	e.putTree(listTree)
	for _, dir := range []string{"", "dir", "dir/sub", "dir/sub/deep", "dir-2", "a", "a/b"} {
		e.checkListing(dir, childrenOf(listTree, dir))
	}

	// A file is not a directory. ErrNotDir says so; a backend that cannot tell a file
	// from a missing directory without another request may say ErrNotFound (see
	// source.Source.List).
	for _, p := range []string{"top.bin", "empty", "dir/one.bin", "a/b/c.bin"} {
		_, err := e.src.List(e.ctx, p)
		checkErr(e.t, fmt.Sprintf("List(%q) of a file", p), err, p, true, source.ErrNotDir, source.ErrNotFound)
		if err != nil && !errors.Is(err, source.ErrNotDir) {
			e.t.Logf("List(%q) of a file: ErrNotFound, not ErrNotDir (allowed): %v", p, err)
		}
	}
	// Missing directories, and prefixes of names that are not directories: an object
	// store must list "di/" as nothing, not the keys that start with "di".
	for _, p := range []string{"nope", "dir/nope", "di", "top", "dir/one", "a/b/c", "dir/sub/dee"} {
		_, err := e.src.List(e.ctx, p)
		checkErr(e.t, fmt.Sprintf("List(%q) of a missing directory", p), err, p, true, source.ErrNotFound)
	}
}

// ListMany: a directory of more entries than one page of an object store's listing
// (1,000 keys) lists whole, beside a subdirectory and files around it.
func testListMany(e *env) {
	const n = 1200
	tree := map[string]int{"before.bin": 1, "many.bin": 2, "many-x/y.bin": 3, "many/sub/z.bin": 4}
	for i := range n {
		tree[fmt.Sprintf("many/f%04d.bin", i)] = i % 7
	}
	e.putTree(tree)
	got := e.checkListing("many", childrenOf(tree, "many"))
	if len(got) != n+1 {
		e.t.Errorf("List(\"many\"): %d entries, want %d", len(got), n+1)
	}
	e.checkListing("", childrenOf(tree, ""))
}
