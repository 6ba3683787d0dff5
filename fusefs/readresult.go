package fusefs

import (
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/playhead/playhead/fetch"
)

// viewResult answers a FUSE read with the block buffers of a fetch.View: go-fuse writes
// the reply header and the slices with one writev(2), so the bytes are copied once, into
// the kernel, instead of first into go-fuse's read buffer. (The default ReadResultData
// path also tries a splice first, which for plain bytes costs a pipe write and a drain
// per read before it falls back to writev.) go-fuse calls Done once the reply is
// written, which gives the buffers back.
type viewResult struct {
	v fetch.View
}

// slicer is the method go-fuse looks for to write a reply with writev from several
// buffers (its ReadResultVector has it too; a test checks the two stay in step).
type slicer interface {
	Slices() ([][]byte, fuse.Status)
}

var (
	_ fuse.ReadResult = (*viewResult)(nil)
	_ slicer          = (*viewResult)(nil)
)

// Slices returns the view's slices; go-fuse writes them without copying.
func (r *viewResult) Slices() ([][]byte, fuse.Status) { return r.v.Slices, fuse.OK }

// Bytes is the fallback for go-fuse paths that want one buffer: one slice is returned as
// is, several are joined in buf (go-fuse's read buffer, as large as the read).
func (r *viewResult) Bytes(buf []byte) ([]byte, fuse.Status) {
	if len(r.v.Slices) == 1 {
		return r.v.Slices[0], fuse.OK
	}
	if cap(buf) < r.v.Len() {
		buf = make([]byte, r.v.Len())
	}
	buf = buf[:r.v.Len()]
	r.v.CopyTo(buf)
	return buf, fuse.OK
}

// Size is the number of bytes read.
func (r *viewResult) Size() int { return r.v.Len() }

// Done gives the buffers back to the fetch scheduler.
func (r *viewResult) Done() { r.v.Release() }
