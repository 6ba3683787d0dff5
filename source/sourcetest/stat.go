package sourcetest

import (
	"fmt"
	"path"

	"github.com/playhead/playhead/source"
)

// Stat: a file has its name, exact size and a version that tells it apart from other
// versions (size and an mtime or ETag), the same version twice running and one that
// matches what the listing showed; directories, implied ones included, and the root are
// directories; missing paths and prefixes of names are not found.
func testStat(e *env) {
	e.putTree(listTree)
	listed := make(map[string]source.Entry)
	for _, dir := range []string{"", "dir", "a/b"} {
		for _, ent := range e.checkListing(dir, childrenOf(listTree, dir)) {
			listed[path.Join(dir, ent.Name)] = ent
		}
	}
	for _, p := range []string{"top.bin", "empty", "dir/one.bin", "a/b/c.bin", oddName, longName, "dir/colon:name.bin"} {
		ent := e.stat(p)
		if ent.Name != path.Base(p) || ent.IsDir {
			e.t.Errorf("Stat(%q) = name %q, IsDir %v; want name %q, a file", p, ent.Name, ent.IsDir, path.Base(p))
		}
		v := ent.Version
		if v.Size != int64(listTree[p]) {
			e.t.Errorf("Stat(%q): size %d, want %d", p, v.Size, listTree[p])
		}
		if !hasValidator(v) {
			e.t.Errorf("Stat(%q): version %v has no modification time or ETag: a replacement of the same size could not be told apart", p, v)
		}
		if again := e.stat(p).Version; !again.Same(v) {
			e.t.Errorf("Stat(%q) twice, unchanged: versions %v and %v are not Same", p, v, again)
		}
		if l, ok := listed[p]; ok && !l.Version.Matches(v) {
			e.t.Errorf("Stat(%q) version %v does not match the listing's %v", p, v, l.Version)
		}
	}
	for _, p := range []string{"dir", "dir-2", "a", "a/b", "dir/sub/deep"} {
		if ent := e.stat(p); !ent.IsDir || ent.Name != path.Base(p) {
			e.t.Errorf("Stat(%q) = name %q, IsDir %v; want a directory named %q", p, ent.Name, ent.IsDir, path.Base(p))
		}
	}
	if root := e.stat(""); !root.IsDir || root.Name != "." {
		e.t.Errorf("Stat(\"\") = name %q, IsDir %v; want the root directory, named \".\"", root.Name, root.IsDir)
	}
	for _, p := range []string{"nope", "nope.bin", "dir/nope", "nope/one.bin", "top", "dir/one", "a/b/c", "di", "dir/sub/dee"} {
		_, err := e.src.Stat(e.ctx, p)
		checkErr(e.t, fmt.Sprintf("Stat(%q) of a missing path", p), err, p, true, source.ErrNotFound)
	}
}

// Paths: a path that is not in the contract's form (leading or trailing slash, empty,
// "." or ".." elements) names nothing, even where it would lead to a file: Stat, List and
// OpenRange say ErrNotFound and serve no byte.
func testPaths(e *env) {
	e.put("dir/f.bin", seedOf("dir/f.bin", 0), 100)
	e.put("g.bin", seedOf("g.bin", 0), 100)
	e.settle()
	for _, p := range []string{"/dir/f.bin", "dir/f.bin/", "./dir/f.bin", "dir/./f.bin", "dir//f.bin",
		"dir/../g.bin", "../g.bin", "/g.bin", "g.bin/", "."} {
		_, err := e.src.Stat(e.ctx, p)
		checkErr(e.t, fmt.Sprintf("Stat(%q)", p), err, p, true, source.ErrNotFound)
		b, err := e.src.OpenRange(e.ctx, p, source.Range{Off: 0, Len: -1}, source.AnyVersion)
		if b != nil {
			b.Close()
		}
		checkErr(e.t, fmt.Sprintf("OpenRange(%q)", p), err, p, true, source.ErrNotFound)
	}
	for _, p := range []string{"/dir", "dir/", "./dir", "dir/.", "dir/sub/..", "/", ".", "dir//"} {
		_, err := e.src.List(e.ctx, p)
		checkErr(e.t, fmt.Sprintf("List(%q)", p), err, p, true, source.ErrNotFound)
	}
}
