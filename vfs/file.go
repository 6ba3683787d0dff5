package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/playhead/playhead/fetch"
	"github.com/playhead/playhead/readahead"
	"github.com/playhead/playhead/source"
)

// File is one open of a remote file. ReadAt may be called concurrently (as the kernel
// does for one FUSE handle); Read and Seek share a position and follow io.ReadSeeker.
type File struct {
	fs     *FS
	fl     atomic.Pointer[fetch.File] // the shared fetch state of the version read; see move
	path   string
	entry  atomic.Pointer[source.Entry] // as opened, or as moved to (same size; see move)
	handle uint64

	// exact is the range an OpenExact File reads, nil for Open's: see exactDecision.
	exact *readahead.Range

	mu     sync.Mutex
	policy *readahead.Policy // guarded by mu; nil when exact
	pos    int64             // guarded by mu; for Read and Seek
	closed bool              // guarded by mu

	// ver orders reads against move: a read holds it shared from the fetch to the
	// moment it marks served; move holds it exclusively, so it sees every byte a
	// read is about to return.
	ver    sync.RWMutex
	served atomic.Bool // a read returned bytes; set under ver shared, read under it exclusive
	pinned atomic.Bool // never move (see Pin)
}

var (
	_ io.ReaderAt       = (*File)(nil)
	_ io.ReadSeekCloser = (*File)(nil)
)

// Size is the file's size in bytes.
func (f *File) Size() int64 { return f.entry.Load().Version.Size }

// Entry describes the file as it was when opened.
func (f *File) Entry() source.Entry { return *f.entry.Load() }

// ErrClosed is returned by reads of a closed File.
var ErrClosed = errors.New("playhead: file already closed")

// ReadAt implements io.ReaderAt.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	return f.ReadAtContext(context.Background(), p, off)
}

// ReadAtContext is ReadAt that gives up waiting when ctx is done.
func (f *File) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	v, err := f.ReadView(ctx, off, len(p))
	n := v.CopyTo(p)
	v.Release()
	return n, err
}

// ReadView is ReadAtContext without the copy: it returns the n bytes at off as a view
// of the fetch scheduler's block buffers (short only at the end of the file, with
// io.EOF). The caller must Release the view, also after an error; until then it holds
// up to n bytes of buffers. The FUSE edge hands the view's slices to the kernel.
func (f *File) ReadView(ctx context.Context, off int64, n int) (fetch.View, error) {
	if n <= 0 {
		return fetch.View{}, nil
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return fetch.View{}, ErrClosed
	}
	var dec readahead.Decision
	if f.exact != nil {
		dec = f.exactDecision(off, int64(n))
	} else {
		dec = f.policy.Read(off, int64(n))
	}
	f.mu.Unlock()
	if f.fs.debug {
		f.fs.log.Debug("read", "path", f.path, "handle", f.handle, "off", off, "len", n, "run", dec.Run,
			"new", dec.New, "superseded", dec.Superseded, "fetch", dec.Fetch.String(), "ahead", dec.Ahead.String())
	}
	owner := fetch.Owner{Handle: f.handle, Run: dec.Run}
	var v fetch.View
	var err error
	for attempt := 0; ; attempt++ {
		f.ver.RLock()
		fl := f.fl.Load()
		v, err = fl.ReadView(ctx, off, n, owner, dec)
		if errors.Is(err, source.ErrChanged) {
			// The bytes before the changed block are not returned: the handle stays
			// unbound if this was its first read, and may follow the change.
			v.Release()
			v = fetch.View{}
		}
		if v.Len() > 0 {
			f.served.Store(true)
		}
		f.ver.RUnlock()
		if !errors.Is(err, source.ErrChanged) {
			break
		}
		f.fs.invalidate(f.path)
		if attempt == maxOpenAttempts-1 || !f.move(ctx, fl) {
			break
		}
		v.Release()
	}
	if err != nil && err != io.EOF {
		err = fmt.Errorf("playhead: %w", err)
	}
	return v, err
}

// exactRun is the run of an OpenExact File's reads: no run of a read-ahead policy
// (whose ids start at 1), nor the -1 of an empty read.
const exactRun = 0

// exactDecision is what an OpenExact File's read of n bytes at off fetches: the read and,
// from it, the rest of the File's range, as demand (readahead.Decision.Fetch, which the
// read does not wait for past its own blocks); no read-ahead, no tail, no run to
// supersede. Claimed once, the rest of the range is pending for the later reads.
func (f *File) exactDecision(off, n int64) readahead.Decision {
	size := f.Size()
	end := min(off+n, size)
	if off >= f.exact.Off && off < f.exact.End {
		end = max(end, min(f.exact.End, size))
	}
	return readahead.Decision{Run: exactRun, Superseded: -1, Fetch: readahead.Range{Off: off, End: end}}
}

// Read implements io.Reader.
func (f *File) Read(p []byte) (int, error) {
	f.mu.Lock()
	pos := f.pos
	f.mu.Unlock()
	n, err := f.ReadAt(p, pos)
	f.mu.Lock()
	f.pos = pos + int64(n)
	f.mu.Unlock()
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Seek implements io.Seeker.
func (f *File) Seek(off int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += f.pos
	case io.SeekEnd:
		off += f.Size()
	default:
		return 0, fmt.Errorf("playhead: bad whence %d", whence)
	}
	if off < 0 {
		return 0, fmt.Errorf("playhead: seek to negative offset %d", off)
	}
	f.pos = off
	return off, nil
}

// Close releases the file; its read-ahead stops unless another open shares it.
func (f *File) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return ErrClosed
	}
	f.closed = true
	if f.policy != nil {
		f.fs.probes.Record(fileKind(f.path), f.policy.Probed())
	}
	f.mu.Unlock()
	// A move in progress holds ver; the reference it leaves is released after it,
	// without making the caller (the kernel's release) wait for the origin.
	if f.ver.TryLock() {
		f.fl.Load().Release()
		f.ver.Unlock()
		return nil
	}
	go func() {
		f.ver.Lock()
		f.fl.Load().Release()
		f.ver.Unlock()
	}()
	return nil
}

// ResumeElsewhere tells the handle's read-ahead, before its first read, that the
// kernel's page cache may answer its reads of the file's head (the FUSE edge keeps the
// pages an earlier handle of this version filled). It takes effect only when the file's
// first block is cached or on its way here (fetch.File.HeadRead): a new run past the
// head is then a seek to play from and engages read-ahead at once
// (readahead.Policy.ResumeElsewhere).
func (f *File) ResumeElsewhere() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.policy != nil && f.fl.Load().HeadRead() {
		f.policy.ResumeElsewhere()
	}
}

// Pin keeps f on the version it opened for good: a change fails its reads instead of
// moving it (see move). The FUSE edge pins a handle the kernel may serve from pages
// that other handles' reads filled, since f then cannot know what it has returned.
func (f *File) Pin() { f.pinned.Store(true) }

// move makes a File that has returned no byte yet read the origin's current version
// after the one it opened (old) changed: such a handle is not bound to any version, and
// an error would only make the player that just opened the file fail. The new version
// must have the open's size, which the kernel already holds. It reports whether the
// read should be retried.
func (f *File) move(ctx context.Context, old *fetch.File) bool {
	f.ver.Lock()
	defer f.ver.Unlock()
	if f.fl.Load() != old {
		return true // a concurrent read moved it already
	}
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if f.served.Load() || f.pinned.Load() || closed {
		return false
	}
	e, err := f.fs.Stat(ctx, f.path)
	if err != nil || e.IsDir || e.Version.Size != f.Size() {
		return false
	}
	fl := f.fs.fetcher.Open(f.path, e.Version)
	if err := fl.Confirm(ctx, 0); err != nil || fl == old || f.pinned.Load() {
		fl.Release() // pinned meanwhile: another handle may be served this one's pages
		return false
	}
	f.fl.Store(fl)
	f.entry.Store(&e)
	old.Release()
	f.fs.log.Info("object changed at origin before this open read a byte; reading the new version", "path", f.path)
	return true
}

// Version is the version this File reads: the listing's, with the validators the origin
// sent filled in once learned (an ETag, an exact modification time).
func (f *File) Version() source.Version { return f.fl.Load().Version() }

// Changed reports whether the origin's object is known to be another one than this
// File's: its reads fail with an error wrapping source.ErrChanged from then on.
func (f *File) Changed() bool { return f.fl.Load().Err() != nil }

// SameObject reports whether f and o read the same version of the same object through
// one shared fetch state (two opens of an unchanged file do; an open before and one
// after a change do not).
func (f *File) SameObject(o *File) bool { return f.fl.Load() == o.fl.Load() }

// PagesFor decides what the kernel does with a file's cached pages when opened is
// opened: pages were filled by reads of that File (nil: none known), othersOpen says
// handles of other Files of the same path are open, sharedOpen that handles reading
// through the pages are. See fetch.PagesFor.
func PagesFor(pages, opened *File, othersOpen, sharedOpen bool) fetch.PageDecision {
	var pf *fetch.File
	if pages != nil {
		pf = pages.fl.Load()
	}
	return fetch.PagesFor(pf, opened.fl.Load(), othersOpen, sharedOpen)
}
