package vfs_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

// minuteListing lists as an HTML autoindex does: file times to the minute, shown but not
// in the version, and every directory with listedDirTime.
type minuteListing struct{ *memsrc.Source }

var listedDirTime = time.Date(2023, 6, 1, 12, 30, 0, 0, time.UTC)

func (m minuteListing) List(ctx context.Context, p string) ([]source.Entry, error) {
	es, err := m.Source.List(ctx, p)
	for i, e := range es {
		if e.IsDir {
			es[i].ModTime = listedDirTime
			continue
		}
		es[i].ModTime = e.Version.ModTime.Truncate(time.Minute)
		es[i].Version.ModTime = time.Time{}
	}
	return es, err
}

// newUncachedFS is a FS that lists the origin on every lookup, so a change shows at once.
func newUncachedFS(t *testing.T, src source.Source) *vfs.FS {
	t.Helper()
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	opts.Cache.MaxBytes = 64 << 20
	opts.Fetch.IOTimeout = 5 * time.Second
	opts.ListTTL = -1
	fsys, err := vfs.New(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}

func statTime(t *testing.T, fsys *vfs.FS, p string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e, err := fsys.Stat(ctx, p)
	if err != nil {
		t.Fatalf("stat %q: %v", p, err)
	}
	return e.Time()
}

// A file shows its version's time, whether the listing gave it or a HEAD did; a directory
// shows its newest entry's time once listed; the root is listed for its time; a change at
// the origin shows the new time.
func TestTimesFromVersions(t *testing.T) {
	for _, hide := range []bool{false, true} {
		mem := memsrc.New()
		mem.AddPattern("a.bin", seed, 10)     // version 0
		mem.AddPattern("dir/b.bin", seed, 20) // version 1
		mem.AddPattern("dir/sub/c.bin", seed, 30)
		mem.HideListSizes(hide)
		fsys := newUncachedFS(t, mem)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		va, _ := mem.Version("a.bin")
		vb, _ := mem.Version("dir/b.bin")
		if got := statTime(t, fsys, "a.bin"); !got.Equal(va.ModTime) {
			t.Errorf("hide sizes %v: a.bin shows %v, want %v", hide, got, va.ModTime)
		}
		if got := statTime(t, fsys, ""); !got.Equal(va.ModTime) {
			t.Errorf("hide sizes %v: root shows %v, want its newest file's %v", hide, got, va.ModTime)
		}
		if got := statTime(t, fsys, "dir"); !got.IsZero() {
			t.Errorf("hide sizes %v: dir shows %v before it was listed, want none", hide, got)
		}
		if _, err := fsys.ReadDir(ctx, "dir"); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if got := statTime(t, fsys, "dir"); !got.Equal(vb.ModTime) {
				t.Errorf("hide sizes %v: listed dir shows %v, want %v", hide, got, vb.ModTime)
			}
		}
		mem.Replace("dir/b.bin", []byte("new bytes"))
		nb, _ := mem.Version("dir/b.bin")
		if got := statTime(t, fsys, "dir/b.bin"); !got.Equal(nb.ModTime) || nb.ModTime.Equal(vb.ModTime) {
			t.Errorf("hide sizes %v: replaced file shows %v, want %v (was %v)", hide, got, nb.ModTime, vb.ModTime)
		}
		if got := statTime(t, fsys, "dir"); !got.Equal(nb.ModTime) {
			t.Errorf("hide sizes %v: dir of a replaced file shows %v, want %v", hide, got, nb.ModTime)
		}
	}
}

// A listing's time to the minute is what a file shows before a HEAD, after it and after
// a read, while reads are checked against the exact version the HEAD gave.
func TestListingTimeStaysAfterRead(t *testing.T) {
	mem := memsrc.New()
	for range 7 { // versions count seconds from a whole minute: make this one fall within it
		mem.AddPattern("dir/a.bin", seed, 100<<10)
	}
	mem.HideListSizes(true) // every stat asks the origin for the size
	v, _ := mem.Version("dir/a.bin")
	want := v.ModTime.Truncate(time.Minute)
	if want.Equal(v.ModTime) {
		t.Fatalf("version time %v is a whole minute: the test cannot tell the listing's time from it", v.ModTime)
	}
	fsys := newUncachedFS(t, minuteListing{mem})
	if got := statTime(t, fsys, "dir/a.bin"); !got.Equal(want) {
		t.Fatalf("before a read: %v, want the listing's %v", got, want)
	}
	if got := statTime(t, fsys, "dir"); !got.Equal(listedDirTime) {
		t.Errorf("dir shows %v, want its parent listing's %v", got, listedDirTime)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f, err := fsys.Open(ctx, "dir/a.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Entry().Version.ModTime.Equal(v.ModTime) {
		t.Errorf("open version %v, want the origin's exact %v", f.Entry().Version, v)
	}
	if n, err := io.Copy(io.Discard, io.NewSectionReader(f, 0, 100<<10)); err != nil || n != 100<<10 {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	if got := f.Entry().Time(); !got.Equal(want) {
		t.Errorf("open file shows %v, want %v", got, want)
	}
	if got := statTime(t, fsys, "dir/a.bin"); !got.Equal(want) {
		t.Errorf("after a read: %v, want %v", got, want)
	}
}
