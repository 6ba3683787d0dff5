package vfs

import (
	"context"
	"errors"
	"testing"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// sizelessSource hides every file's size, as an origin answering chunked does.
type sizelessSource struct{ source.Source }

func (s sizelessSource) Stat(ctx context.Context, p string) (source.Entry, error) {
	e, err := s.Source.Stat(ctx, p)
	if !e.IsDir {
		e.Version.Size = -1
	}
	return e, err
}

func (s sizelessSource) List(ctx context.Context, p string) ([]source.Entry, error) {
	l, err := s.Source.List(ctx, p)
	for i := range l {
		if !l[i].IsDir {
			l[i].Version.Size = -1
		}
	}
	return l, err
}

// A file whose size the source cannot tell is listed, and refused at Open with
// ErrUnknownSize: no panic, and the FS closes cleanly afterwards.
func TestOpenUnknownSizeIsRefused(t *testing.T) {
	mem := memsrc.New()
	mem.AddPattern("a.bin", 1, 1<<20)
	opts := DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	fsys, err := New(sizelessSource{mem}, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	ctx := context.Background()
	if l, err := fsys.ReadDir(ctx, ""); err != nil || len(l) != 1 {
		t.Fatalf("ReadDir: %v, %v; want a.bin listed", l, err)
	}
	for range 2 { // the second open must not find anything left over by the first
		f, err := fsys.Open(ctx, "a.bin")
		if !errors.Is(err, ErrUnknownSize) {
			t.Fatalf("Open: %v, %v; want ErrUnknownSize", f, err)
		}
	}
}
