package vfs

import (
	"errors"

	"github.com/playhead/playhead/source"
)

// ErrUnknownSize is wrapped by Open's error for a file whose size the origin would not
// tell: neither the listing, nor a HEAD (Content-Length), nor a ranged GET
// (Content-Range total) gave it. Such a file is listed (with size 0) but not opened:
// the block cache, the read-ahead policy and the kernel all need the size, and a
// guessed one would cut the file short or serve bytes past its end.
var ErrUnknownSize = errors.New("origin gives no size for this file (no Content-Length, no Content-Range total)")

// refuseUnknownSize returns the error for opening p, whose size is unknown, and logs it
// once per open: a refused open is something a user asks about.
func (fs *FS) refuseUnknownSize(p string) error {
	fs.log.Warn("cannot open: the origin gives no size for this file", "path", p, "source", fs.src.String())
	return &source.PathError{Op: "open", Path: p, Off: -1, Err: ErrUnknownSize}
}
