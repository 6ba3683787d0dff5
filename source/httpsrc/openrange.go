package httpsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/playhead/playhead/source"
)

// maxSkipIgnoredRange is how many bytes OpenRange reads and throws away when an origin
// answers a ranged GET with the whole file (200): cheaper than failing for a small seek,
// hopeless for a large one.
const maxSkipIgnoredRange = 8 << 20

// errIgnoresRange is returned when an origin without Range support is asked for a range
// far into a file.
var errIgnoresRange = errors.New("origin ignores Range requests")

// OpenRange implements source.Source with a conditional ranged GET (see the package
// comment). The body's context is the request's: cancelling ctx or closing the body
// aborts the transfer.
func (s *Source) OpenRange(ctx context.Context, p string, r source.Range, want source.Version) (source.Body, error) {
	fail := func(err error) (source.Body, error) {
		return nil, &source.PathError{Op: "open", Path: p, Off: r.Off, Err: err}
	}
	if r.Off < 0 {
		return fail(errors.New("negative offset"))
	}
	if err := s.resolve(ctx); err != nil {
		return fail(err)
	}
	if p == "" {
		return fail(errIsDir)
	}
	u, err := s.fileURL(p)
	if err != nil {
		return fail(err)
	}
	if r.Len == 0 {
		return &body{path: p, off: r.Off, rc: http.NoBody, remaining: 0, version: want, cancel: func() {}}, nil
	}
	// The request lives as long as the body: Close cancels it, which unblocks a Read in
	// another goroutine by closing the connection.
	rctx, cancelReq := context.WithCancel(ctx)
	rctx = s.spare.Trace(rctx)
	conn := &rangeConn{}
	rctx = httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { conn.got(i.Conn) }})
	done := s.spare.Busy()
	cancel := func() { cancelReq(); done() }
	req, err := s.newRequest(rctx, http.MethodGet, u)
	if err != nil {
		cancel()
		return fail(err)
	}
	if r.Len < 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(r.Off, 10)+"-")
	} else {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(r.Off, 10)+"-"+strconv.FormatInt(r.Off+r.Len-1, 10))
	}
	switch {
	case want.ETag != "" && !strings.HasPrefix(want.ETag, "W/"):
		req.Header.Set("If-Match", want.ETag)
	case !want.ModTime.IsZero():
		req.Header.Set("If-Unmodified-Since", want.ModTime.UTC().Format(http.TimeFormat))
	}
	resp, err := s.client.Do(req)
	s.spare.Check()
	if err != nil {
		cancel()
		return fail(err)
	}
	if redirectedToDir(resp, u) {
		// A directory: its listing must not be served as the bytes of a file.
		resp.Body.Close()
		cancel()
		return fail(errIsDir)
	}
	b, err := s.checkRange(resp, p, r, want)
	if err != nil {
		resp.Body.Close()
		cancel()
		return fail(err)
	}
	b.cancel, b.abandoned, b.conn = cancel, s.spare.Abandoned, conn
	return b, nil
}

// checkRange turns the answer to a ranged GET into a body, or an error when the answer
// is for another version or another range.
func (s *Source) checkRange(resp *http.Response, p string, r source.Range, want source.Version) (*body, error) {
	got := versionOf(resp)
	b := &body{path: p, off: r.Off, rc: resp.Body, version: got}
	switch resp.StatusCode {
	case http.StatusPartialContent:
		first, last, total, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil {
			return nil, err
		}
		if first < 0 {
			return nil, fmt.Errorf("206 answer without a byte range")
		}
		if want.Size >= 0 && total >= 0 && total != want.Size {
			return nil, fmt.Errorf("%w: origin size %d, want %d", source.ErrChanged, total, want.Size)
		}
		if first != r.Off {
			return nil, fmt.Errorf("origin sent bytes from %d, asked from %d", first, r.Off)
		}
		b.remaining = last - first + 1
		if r.Len >= 0 && b.remaining > r.Len {
			b.remaining = r.Len // more than asked: keep what was asked
		}
	case http.StatusOK:
		if got.Size >= 0 && r.Off >= got.Size {
			b.remaining = 0
			break
		}
		if r.Off > 0 {
			if r.Off > maxSkipIgnoredRange {
				return nil, fmt.Errorf("%w (answered 200 to a range at %d)", errIgnoresRange, r.Off)
			}
			n, err := io.CopyN(io.Discard, resp.Body, r.Off)
			if err == io.EOF && got.Size < 0 {
				b.remaining = 0 // unknown size and shorter than r.Off: past the end
				break
			}
			if err != nil {
				return nil, fmt.Errorf("skipping %d bytes of a whole-file answer, got %d: %w", r.Off, n, err)
			}
		}
		b.remaining = -1
		if got.Size >= 0 {
			b.remaining = got.Size - r.Off
		}
		if r.Len >= 0 && (b.remaining < 0 || b.remaining > r.Len) {
			b.remaining = r.Len
		}
	case http.StatusRequestedRangeNotSatisfiable:
		// The range starts at or past the end: an empty body, if the size is the one wanted.
		_, _, total, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err == nil {
			got.Size = total
		} else {
			got.Size = want.Size
		}
		if want.Size >= 0 && got.Size >= 0 && got.Size != want.Size {
			return nil, fmt.Errorf("%w: origin size %d, want %d", source.ErrChanged, got.Size, want.Size)
		}
		if got.Size >= 0 && r.Off < got.Size {
			return nil, fmt.Errorf("origin refused range at %d of a %d-byte object", r.Off, got.Size)
		}
		resp.Body.Close()
		b.rc, b.remaining, b.version = http.NoBody, 0, got
		return b, nil
	default:
		return nil, statusError(resp)
	}
	if !want.Matches(got) {
		return nil, fmt.Errorf("%w: origin has %v, want %v", source.ErrChanged, got, want)
	}
	return b, nil
}

// body reads one ranged answer and checks it arrives whole.
type body struct {
	path      string
	off       int64 // offset of the next byte
	rc        io.ReadCloser
	remaining int64 // bytes still expected; -1 when unknown (read to EOF)
	version   source.Version
	cancel    func()
	abandoned func()      // told when the body is closed before its end (spare.Conns.Abandoned)
	conn      *rangeConn  // the connection, for BoundReceive (recvwindow.go); nil for an empty body
	ended     atomic.Bool // Read reported EOF: the connection went back to the pool
	closed    atomic.Bool
}

// Read reads the body. Its io.EOF is recorded in ended, which Close (possibly in another
// goroutine, hence atomic, not remaining) reads to tell a finished body from an abandoned one.
func (b *body) Read(p []byte) (int, error) {
	n, err := b.read(p)
	if err == io.EOF {
		b.ended.Store(true)
	}
	return n, err
}

func (b *body) read(p []byte) (int, error) {
	if b.remaining == 0 {
		return 0, io.EOF
	}
	if b.remaining > 0 && int64(len(p)) >= b.remaining {
		p = p[:b.remaining]
		if b.conn != nil {
			// This read may end the answer, and the transport pools the connection as it
			// does: lift a window cap first (recvwindow.go).
			b.conn.undo()
		}
	}
	n, err := b.rc.Read(p)
	b.off += int64(n)
	if b.remaining > 0 {
		b.remaining -= int64(n)
	}
	if b.conn != nil && n > 0 && b.remaining != 0 {
		b.conn.drained(n)
	}
	switch {
	case err == io.EOF && b.remaining > 0:
		err = io.ErrUnexpectedEOF
	case err == io.EOF:
		return n, io.EOF
	case err == nil && b.remaining == 0:
		b.observeEOF()
		return n, io.EOF
	case err == nil:
		return n, nil
	}
	if b.closed.Load() {
		err = fmt.Errorf("body closed: %w", err)
	}
	return n, &source.PathError{Op: "read", Path: b.path, Off: b.off, Err: err}
}

// observeEOF reads the answer's end after its last expected byte. Go's transport puts a
// connection back in the idle pool only once the body reported EOF; closing it with the
// EOF unread discards the connection, and the next range pays a new handshake.
func (b *body) observeEOF() {
	var one [1]byte
	b.rc.Read(one[:]) // (0, io.EOF) at once for an exact-length answer
}

// Close aborts the request, then closes the answer. Safe to call from another goroutine
// during a Read and more than once.
func (b *body) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.cancel()
	err := b.rc.Close()
	if b.conn != nil {
		b.conn.undo()
	}
	if !b.ended.Load() && b.abandoned != nil {
		b.abandoned()
	}
	return err
}

func (b *body) Version() source.Version { return b.version }
