package blobsrc

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/playhead/playhead/internal/testlog"
	"github.com/playhead/playhead/source"
)

// memSource is a source over gocloud.dev's in-memory bucket, seeded with keys, and the
// log its warnings go to. It tests what needs no cloud: names, directories, pages.
func memSource(t *testing.T, prefix string, keys ...string) (*Source, *blob.Bucket, *testlog.Buffer) {
	t.Helper()
	b := memblob.OpenBucket(nil)
	for _, k := range keys {
		if err := b.WriteAll(t.Context(), k, []byte("data of "+k), nil); err != nil {
			t.Fatal(err)
		}
	}
	logs := &testlog.Buffer{}
	s := NewFromBucket(b, S3, "mem://", prefix, 5*time.Second, slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(func() { s.Close() })
	return s, b, logs
}

func names(es []source.Entry) []string {
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

// Keys that cannot be file names are skipped with one warning each, however often the
// directory is listed; a key that is both an object and a prefix shows as the directory.
func TestUnnameableKeysSkippedWithOneWarning(t *testing.T) {
	long := strings.Repeat("n", 256)
	s, _, logs := memSource(t, "",
		"ok.bin", "dir/", "dir/in.bin", // a folder marker and its contents
		"both", "both/inner.bin", // an object and a prefix
		"bad//x", "dots/./y", "dots/../z", "nul\x00name", long, "fine/"+strings.Repeat("m", 255))
	for range 3 {
		es, err := s.List(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := names(es), []string{"bad/", "both/", "dir/", "dots/", "fine/", "ok.bin"}; !slices.Equal(got, want) {
			t.Fatalf("root: %q, want %q", got, want)
		}
		for _, dir := range []string{"bad", "dots"} {
			es, err := s.List(t.Context(), dir)
			if err != nil || len(es) != 0 {
				t.Fatalf("List(%q) = %v, %v; want no entries", dir, names(es), err)
			}
		}
		es, err = s.List(t.Context(), "dir")
		if err != nil || !slices.Equal(names(es), []string{"in.bin"}) {
			t.Fatalf("List(dir) = %v, %v; want the object, not the folder marker", names(es), err)
		}
		es, err = s.List(t.Context(), "fine")
		if err != nil || len(es) != 1 {
			t.Fatalf("a 255-byte name is valid: %v, %v", names(es), err)
		}
	}
	out := logs.String()
	for _, key := range []string{`"both"`, `"bad//"`, `"dots/./"`, `"dots/../"`, `"nul\x00name"`, `"` + long + `"`} {
		if n := strings.Count(out, "key="+strconvQuote(key)); n != 1 {
			t.Errorf("key %s warned %d times, want once:\n%s", key, n, out)
		}
	}
	if strings.Count(out, "level=WARN") != 6 {
		t.Errorf("want 6 warnings, got:\n%s", out)
	}
	// Unnameable paths are never asked for.
	for _, p := range []string{"bad//x", "dots/./y", "a/../b", ""} {
		if _, err := s.OpenRange(t.Context(), p, source.Range{Len: 1}, source.AnyVersion); !errors.Is(err, source.ErrNotFound) {
			t.Errorf("OpenRange(%q): %v, want ErrNotFound", p, err)
		}
	}
}

// strconvQuote is how slog's text handler writes a string value that needs quoting.
func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

// A folder of more objects than one page lists whole, in several calls.
func TestListPaginates(t *testing.T) {
	var keys []string
	for i := range 2*pageSize + 7 {
		keys = append(keys, fmt.Sprintf("big/f%05d", i))
	}
	s, _, _ := memSource(t, "", keys...)
	es, err := s.List(t.Context(), "big")
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != len(keys) {
		t.Fatalf("%d entries, want %d", len(es), len(keys))
	}
}

// Directories are prefixes: stat tells them from objects and from nothing, and the
// source's own prefix is its root.
func TestPrefixesAreDirectories(t *testing.T) {
	s, _, _ := memSource(t, "root/", "root/a/b/c.bin", "root/top.bin", "other/x.bin")
	for p, dir := range map[string]bool{"a": true, "a/b": true, "a/b/c.bin": false, "top.bin": false} {
		e, err := s.Stat(t.Context(), p)
		if err != nil || e.IsDir != dir {
			t.Errorf("Stat(%q) = %+v, %v; want IsDir=%v", p, e, err, dir)
		}
	}
	if _, err := s.Stat(t.Context(), "x.bin"); !errors.Is(err, source.ErrNotFound) {
		t.Errorf("an object outside the prefix: %v, want ErrNotFound", err)
	}
	if _, err := s.List(t.Context(), "top.bin"); !errors.Is(err, source.ErrNotDir) {
		t.Errorf("List of an object: %v, want ErrNotDir", err)
	}
	if _, err := s.List(t.Context(), "nothing"); !errors.Is(err, source.ErrNotFound) {
		t.Errorf("List of nothing: %v, want ErrNotFound", err)
	}
	body, err := s.OpenRange(t.Context(), "a/b/c.bin", source.Range{Off: 8, Len: -1}, source.AnyVersion)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	if data, err := io.ReadAll(body); err != nil || string(data) != "root/a/b/c.bin" {
		t.Errorf("open-ended read from 8: %q, %v", data, err)
	}
}
