package localsrc

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
)

func writePattern(t *testing.T, path string, seed uint64, size int64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, size)
	pattern.Fill(seed, data, 0)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLocal(t *testing.T) {
	dir := t.TempDir()
	writePattern(t, filepath.Join(dir, "a.bin"), 1, 10000)
	writePattern(t, filepath.Join(dir, "sub", "b.bin"), 2, 100)
	os.Symlink("/etc/passwd", filepath.Join(dir, "escape"))
	ctx := context.Background()

	s, err := New("file://" + dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	root, err := s.Stat(ctx, "")
	if err != nil || !root.IsDir {
		t.Fatalf("Stat root = %+v, %v", root, err)
	}
	e, err := s.Stat(ctx, "a.bin")
	if err != nil || e.Version.Size != 10000 || e.Version.ModTime.IsZero() || e.Name != "a.bin" {
		t.Fatalf("Stat = %+v, %v", e, err)
	}
	if _, err := s.Stat(ctx, "../etc/passwd"); !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("Stat outside: %v", err)
	}
	if _, err := s.Stat(ctx, "escape"); err == nil {
		t.Fatal("symlink out of the root was followed")
	}

	entries, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a.bin", "sub"}) {
		t.Fatalf("List = %v", names)
	}
	if _, err := s.List(ctx, "a.bin"); !errors.Is(err, source.ErrNotDir) {
		t.Fatalf("List file: %v", err)
	}

	b, err := s.OpenRange(ctx, "a.bin", source.Range{Off: 9000, Len: 5000}, e.Version)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(b)
	b.Close()
	if err != nil || len(data) != 1000 || pattern.Verify(1, data, 9000) != nil {
		t.Fatalf("read %d bytes, %v", len(data), err)
	}
	b, _ = s.OpenRange(ctx, "a.bin", source.Range{Off: 20000, Len: -1}, e.Version)
	if data, err := io.ReadAll(b); err != nil || len(data) != 0 {
		t.Fatalf("past end: %d bytes, %v", len(data), err)
	}

	// A rewrite changes the version.
	time.Sleep(10 * time.Millisecond)
	writePattern(t, filepath.Join(dir, "a.bin"), 3, 10000)
	if _, err := s.OpenRange(ctx, "a.bin", source.Range{Off: 0, Len: 10}, e.Version); !errors.Is(err, source.ErrChanged) {
		t.Fatalf("after rewrite: %v", err)
	}

	// A file that shrinks under an open body ends it with ErrUnexpectedEOF.
	e, _ = s.Stat(ctx, "a.bin")
	b, _ = s.OpenRange(ctx, "a.bin", source.Range{Off: 0, Len: -1}, e.Version)
	os.Truncate(filepath.Join(dir, "a.bin"), 5000)
	if _, err := io.ReadAll(b); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("shrunk file: %v", err)
	}
}

func TestNewRejects(t *testing.T) {
	dir := t.TempDir()
	writePattern(t, filepath.Join(dir, "f"), 1, 1)
	if _, err := New(filepath.Join(dir, "f")); !errors.Is(err, source.ErrNotDir) {
		t.Fatalf("file: %v", err)
	}
	if _, err := New(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing dir accepted")
	}
	if _, err := New("file://otherhost/x"); err == nil || !strings.Contains(err.Error(), "bad source URL") {
		t.Fatalf("remote file URL: %v", err)
	}
}
