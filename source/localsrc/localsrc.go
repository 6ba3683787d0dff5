// Package localsrc serves a local directory as a source.Source: the reference backend
// for tests of the layers above, and a way to play files from a slow local mount (NFS,
// SMB) through playhead's cache.
//
// Design notes and traps:
//   - All access goes through an os.Root, so no path (not "..", not a symlink) reaches
//     outside the directory.
//   - A version is size and mtime from os.Stat; there is no ETag. OpenRange compares them
//     with the wanted version when it opens the file, not on every Read: a file rewritten
//     in place while a body is open can still mix bytes, as with any local file. A file
//     that shrinks under a body ends it with io.ErrUnexpectedEOF.
//   - A body is tied to the ctx of OpenRange: once ctx is done, Read fails.
package localsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/playhead/playhead/source"
)

// rootName is the Entry.Name of the root directory (Stat("")).
const rootName = "."

// Source is a local directory. It is safe for concurrent use.
type Source struct {
	dir  string
	root *os.Root
}

var _ source.Source = (*Source)(nil)

// New returns a source for dir, a path or a file:// URL. It fails if dir is not a
// directory.
func New(dir string) (*Source, error) {
	if strings.HasPrefix(dir, "file:") {
		u, err := url.Parse(dir)
		if err != nil {
			return nil, fmt.Errorf("playhead: bad source URL %q: %w", dir, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("playhead: bad source URL %q: file URLs must name a local path", dir)
		}
		dir = filepath.FromSlash(u.Path)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("playhead: source directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("playhead: source %q: %w", dir, source.ErrNotDir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("playhead: source directory: %w", err)
	}
	return &Source{dir: dir, root: root}, nil
}

// errIsDir is returned when a directory is opened as a file: there is no file at that
// path, which is permanent.
var errIsDir = fmt.Errorf("%w: a directory, not a file", source.ErrNotFound)

// Close releases the directory handle.
func (s *Source) Close() error { return s.root.Close() }

// String implements source.Source.
func (s *Source) String() string { return "file://" + filepath.ToSlash(s.dir) }

// name maps a source path to a name inside the root.
func name(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if !fs.ValidPath(p) || p == "." { // the root is "", not "."
		return "", fmt.Errorf("%w: invalid path", source.ErrNotFound)
	}
	return filepath.FromSlash(p), nil
}

// mapErr turns os errors into source errors.
func mapErr(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %w", source.ErrNotFound, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: %w", source.ErrPermission, err)
	}
	return err
}

func versionOf(fi fs.FileInfo) source.Version {
	return source.Version{Size: fi.Size(), ModTime: fi.ModTime()}
}

func entryOf(n string, fi fs.FileInfo) source.Entry {
	if fi.IsDir() {
		return source.Entry{Name: n, IsDir: true, Version: source.AnyVersion, ModTime: fi.ModTime()}
	}
	return source.Entry{Name: n, Version: versionOf(fi)}
}

// Stat implements source.Source.
func (s *Source) Stat(ctx context.Context, p string) (source.Entry, error) {
	fail := func(err error) (source.Entry, error) {
		return source.Entry{}, &source.PathError{Op: "stat", Path: p, Off: -1, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	n, err := name(p)
	if err != nil {
		return fail(err)
	}
	fi, err := s.root.Stat(n)
	if err != nil {
		return fail(mapErr(err))
	}
	base := rootName
	if p != "" {
		base = p[strings.LastIndexByte(p, '/')+1:]
	}
	return entryOf(base, fi), nil
}

// List implements source.Source. Entries that vanish while listing are skipped; symlinks
// are followed (within the root) so a link to a file lists as that file.
func (s *Source) List(ctx context.Context, p string) ([]source.Entry, error) {
	fail := func(err error) ([]source.Entry, error) {
		return nil, &source.PathError{Op: "list", Path: p, Off: -1, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	n, err := name(p)
	if err != nil {
		return fail(err)
	}
	f, err := s.root.Open(n)
	if err != nil {
		return fail(mapErr(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return fail(mapErr(err))
	} else if !fi.IsDir() {
		return fail(source.ErrNotDir)
	}
	des, err := f.ReadDir(-1)
	if err != nil {
		return fail(mapErr(err))
	}
	out := make([]source.Entry, 0, len(des))
	for _, de := range des {
		fi, err := s.root.Stat(filepath.Join(n, de.Name()))
		if err != nil {
			continue // vanished, or a link leading out of the root
		}
		out = append(out, entryOf(de.Name(), fi))
	}
	return out, nil
}

// OpenRange implements source.Source.
func (s *Source) OpenRange(ctx context.Context, p string, r source.Range, want source.Version) (source.Body, error) {
	fail := func(err error) (source.Body, error) {
		return nil, &source.PathError{Op: "open", Path: p, Off: r.Off, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	if r.Off < 0 {
		return fail(errors.New("negative offset"))
	}
	n, err := name(p)
	if err != nil {
		return fail(err)
	}
	f, err := s.root.Open(n)
	if err != nil {
		return fail(mapErr(err))
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fail(mapErr(err))
	}
	if fi.IsDir() {
		f.Close()
		return fail(errIsDir)
	}
	got := versionOf(fi)
	if !want.Matches(got) {
		f.Close()
		return fail(fmt.Errorf("%w: file has %v, want %v", source.ErrChanged, got, want))
	}
	length := max(got.Size-r.Off, 0)
	if r.Len >= 0 && r.Len < length {
		length = r.Len
	}
	return &body{f: f, sr: io.NewSectionReader(f, r.Off, length), ctx: ctx, path: p,
		off: r.Off, remaining: length, version: got}, nil
}

// body reads a section of an open file.
type body struct {
	f         *os.File
	sr        *io.SectionReader
	ctx       context.Context
	path      string
	off       int64 // offset of the next byte
	remaining int64
	version   source.Version
	closed    atomic.Bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, &source.PathError{Op: "read", Path: b.path, Off: b.off, Err: os.ErrClosed}
	}
	if err := b.ctx.Err(); err != nil {
		return 0, &source.PathError{Op: "read", Path: b.path, Off: b.off, Err: err}
	}
	if b.remaining == 0 {
		return 0, io.EOF
	}
	n, err := b.sr.Read(p)
	b.off += int64(n)
	b.remaining -= int64(n)
	switch {
	case err == io.EOF && b.remaining > 0:
		err = io.ErrUnexpectedEOF // the file shrank
	case err == io.EOF || err == nil:
		return n, err
	}
	return n, &source.PathError{Op: "read", Path: b.path, Off: b.off, Err: err}
}

// Close closes the file; a Read running in another goroutine fails with os.ErrClosed.
func (b *body) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	return b.f.Close()
}

func (b *body) Version() source.Version { return b.version }
