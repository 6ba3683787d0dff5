package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/origin"
)

// MismatchError says the filesystem returned bytes that are not the origin's. The
// runner aborts the run on one.
type MismatchError struct {
	Path string // origin path
	Err  error  // pattern.Verify's error, naming the first wrong offset
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("DATA MISMATCH in %s: %v", e.Path, e.Err)
}

func (e *MismatchError) Unwrap() error { return e.Err }

// IsMismatch reports whether err is or wraps a *MismatchError.
func IsMismatch(err error) bool {
	var m *MismatchError
	return errors.As(err, &m)
}

// seedOf is the pattern seed of the bytes the origin serves for f: generation 0, since
// the benchmark never replaces a file.
func seedOf(f origin.File) uint64 { return origin.Seed(f.Seed, 0) }

// check verifies that p holds the bytes of the origin file f at off.
func check(originPath string, f origin.File, p []byte, off int64) error {
	if err := pattern.Verify(seedOf(f), p, off); err != nil {
		return &MismatchError{Path: originPath, Err: err}
	}
	return nil
}

// verifiedFile is an open file of the mount whose reads are checked against the pattern.
// ReadAt has io.ReaderAt's contract and is as safe for concurrent use as the file's.
type verifiedFile struct {
	f    fs.File
	ra   io.ReaderAt
	path string // origin path
	file origin.File
}

// openVerified opens the origin path p of the mount fsys.
func openVerified(fsys fs.FS, p string, f origin.File) (*verifiedFile, error) {
	fh, err := fsys.Open(p)
	if err != nil {
		return nil, err
	}
	ra, ok := fh.(io.ReaderAt)
	if !ok {
		fh.Close()
		return nil, fmt.Errorf("open %s: the mount's files do not implement io.ReaderAt", p)
	}
	return &verifiedFile{f: fh, ra: ra, path: p, file: f}, nil
}

func (v *verifiedFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := v.ra.ReadAt(p, off)
	if n > 0 {
		if verr := check(v.path, v.file, p[:n], off); verr != nil {
			return n, verr
		}
	}
	if err == nil && n < len(p) {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (v *verifiedFile) Close() error { return v.f.Close() }

// wantSize checks that the mount reports the origin's size, so a truncated file is not
// played as a short one.
func (v *verifiedFile) wantSize() error {
	st, err := v.f.Stat()
	if err != nil {
		return err
	}
	if st.Size() != v.file.Size {
		return &MismatchError{Path: v.path, Err: fmt.Errorf("size %d, origin has %d", st.Size(), v.file.Size)}
	}
	return nil
}

// mountAndOpen mounts the system under test and opens p, checking that it has the size
// the origin serves: how every one-file case starts.
func mountAndOpen(ctx context.Context, env Env, p string, f origin.File) (*verifiedFile, error) {
	fsys, err := env.Mount(ctx)
	if err != nil {
		return nil, err
	}
	vf, err := openVerified(fsys, p, f)
	if err != nil {
		return nil, err
	}
	if err := vf.wantSize(); err != nil {
		vf.Close()
		return nil, err
	}
	return vf, nil
}
