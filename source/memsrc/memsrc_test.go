package memsrc

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
)

func readRange(t *testing.T, s source.Source, path string, r source.Range, want source.Version) ([]byte, source.Version) {
	t.Helper()
	b, err := s.OpenRange(context.Background(), path, r, want)
	if err != nil {
		t.Fatalf("OpenRange(%q, %+v): %v", path, r, err)
	}
	defer b.Close()
	data, err := io.ReadAll(b)
	if err != nil {
		t.Fatalf("read %q %+v: %v", path, r, err)
	}
	return data, b.Version()
}

func TestStatList(t *testing.T) {
	ctx := context.Background()
	s := New()
	s.Add("a.txt", []byte("hello"))
	s.AddPattern("movies/big.mkv", 7, 1<<40) // a TiB, never allocated
	s.AddPattern("movies/extra/x.mkv", 8, 10)

	root, err := s.Stat(ctx, "")
	if err != nil || !root.IsDir || root.Name != "." {
		t.Fatalf("Stat root = %+v, %v", root, err)
	}
	e, err := s.Stat(ctx, "movies/big.mkv")
	if err != nil || e.IsDir || e.Name != "big.mkv" || e.Version.Size != 1<<40 || e.Version.ETag == "" || e.Version.ModTime.IsZero() {
		t.Fatalf("Stat file = %+v, %v", e, err)
	}
	if e, err := s.Stat(ctx, "movies/extra"); err != nil || !e.IsDir || e.Name != "extra" {
		t.Fatalf("Stat dir = %+v, %v", e, err)
	}
	if _, err := s.Stat(ctx, "nope"); !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("Stat missing: %v", err)
	}

	names := func(es []source.Entry) []string {
		var out []string
		for _, e := range es {
			n := e.Name
			if e.IsDir {
				n += "/"
			}
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	es, err := s.List(ctx, "")
	if err != nil || !slices.Equal(names(es), []string{"a.txt", "movies/"}) {
		t.Fatalf("List root = %v, %v", names(es), err)
	}
	es, err = s.List(ctx, "movies")
	if err != nil || !slices.Equal(names(es), []string{"big.mkv", "extra/"}) {
		t.Fatalf("List movies = %v, %v", names(es), err)
	}
	if _, err := s.List(ctx, "a.txt"); !errors.Is(err, source.ErrNotDir) {
		t.Fatalf("List file: %v", err)
	}
	if _, err := s.List(ctx, "nope"); !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("List missing: %v", err)
	}
	s.HideListSizes(true)
	es, _ = s.List(ctx, "")
	for _, e := range es {
		if e.Version.Size != -1 {
			t.Fatalf("hidden size reported: %+v", e)
		}
	}
	if got := s.Stats(); got.Lists != 5 || got.Stats != 4 {
		t.Fatalf("Stats = %+v", got)
	}
}

func TestOpenRange(t *testing.T) {
	s := New()
	s.Add("a.txt", []byte("hello world"))
	s.AddPattern("p", 3, 1000)

	if got, _ := readRange(t, s, "a.txt", source.Range{Off: 6, Len: -1}, source.AnyVersion); string(got) != "world" {
		t.Fatalf("open-ended = %q", got)
	}
	if got, _ := readRange(t, s, "a.txt", source.Range{Off: 2, Len: 3}, source.AnyVersion); string(got) != "llo" {
		t.Fatalf("bounded = %q", got)
	}
	if got, _ := readRange(t, s, "a.txt", source.Range{Off: 11, Len: 5}, source.AnyVersion); len(got) != 0 {
		t.Fatalf("past end = %q", got)
	}
	got, v := readRange(t, s, "p", source.Range{Off: 990, Len: 100}, source.AnyVersion)
	if len(got) != 10 || v.Size != 1000 {
		t.Fatalf("pattern tail: %d bytes, %v", len(got), v)
	}
	if err := pattern.Verify(3, got, 990); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Opens != 4 || st.BytesServed != 5+3+10 {
		t.Fatalf("Stats = %+v", st)
	}
	if _, err := s.OpenRange(context.Background(), "missing", source.Range{}, source.AnyVersion); !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

func TestReplaceChangesVersion(t *testing.T) {
	ctx := context.Background()
	s := New()
	s.Add("f", []byte("old bytes"))
	v1, _ := s.Version("f")
	old, err := s.OpenRange(ctx, "f", source.Range{Off: 0, Len: -1}, v1)
	if err != nil {
		t.Fatal(err)
	}
	s.Replace("f", []byte("new bytes"))
	v2, _ := s.Version("f")
	if v1.Matches(v2) || !v2.ModTime.After(v1.ModTime) || v1.ETag == v2.ETag {
		t.Fatalf("versions %v and %v", v1, v2)
	}
	if got, _ := io.ReadAll(old); string(got) != "old bytes" {
		t.Fatalf("body opened before Replace read %q", got)
	}
	if _, err := s.OpenRange(ctx, "f", source.Range{Off: 0, Len: -1}, v1); !errors.Is(err, source.ErrChanged) {
		t.Fatalf("old version: %v", err)
	}
	// Only the ETag known: still a mismatch.
	if _, err := s.OpenRange(ctx, "f", source.Range{}, source.Version{Size: -1, ETag: v1.ETag}); !errors.Is(err, source.ErrChanged) {
		t.Fatalf("old etag: %v", err)
	}
	if got, _ := readRange(t, s, "f", source.Range{Off: 0, Len: -1}, v2); string(got) != "new bytes" {
		t.Fatalf("new = %q", got)
	}
	s.Remove("f")
	if _, err := s.Stat(ctx, "f"); !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("after Remove: %v", err)
	}
}

func TestBodyCloseAndCancel(t *testing.T) {
	s := New()
	s.AddPattern("p", 1, 100)
	b, _ := s.OpenRange(context.Background(), "p", source.Range{Off: 0, Len: -1}, source.AnyVersion)
	b.Close()
	b.Close()
	if _, err := b.Read(make([]byte, 10)); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b, _ = s.OpenRange(ctx, "p", source.Range{Off: 0, Len: -1}, source.AnyVersion)
	cancel()
	if _, err := b.Read(make([]byte, 10)); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v", err)
	}
}

func TestAddPanicsOnBadPath(t *testing.T) {
	for _, p := range []string{"", "/a", "a/../b", "a//b", "dir"} {
		s := New()
		s.Add("dir/x", nil)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Add(%q) did not panic", p)
				}
			}()
			s.Add(p, []byte("x"))
		}()
	}
}
