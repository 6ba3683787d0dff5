package httpsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Metadata requests (HEAD, listings, the one-byte GET that learns a size) are bounded by
// Options.Timeout as a whole, from the dial to the last byte of the body, with a
// deadline that restarts whenever the body makes progress: a large listing on a slow
// link still completes, while an origin that sends headers and then goes silent fails
// the request within the timeout instead of blocking readdir or stat forever. Ranges
// are bounded by the fetcher instead (fetch.Options.IOTimeout), which knows when a
// stalled body is worth reopening.

// ErrMetaTimeout is wrapped by the error of a metadata request on which the origin made
// no progress for Options.Timeout. It does not wrap context.Canceled: the caller did
// not give up, the origin did.
var ErrMetaTimeout = errors.New("origin made no progress within the I/O timeout")

// metaDo sends a metadata request built by mk and returns its answer, whose body the
// caller must close. The deadline runs until the body is closed.
func (s *Source) metaDo(ctx context.Context, method string, u *url.URL, mk func(*http.Request)) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	d := &progressDeadline{timeout: s.timeout, cancel: cancel}
	d.timer = time.AfterFunc(s.timeout, d.expire)
	req, err := s.newRequest(ctx, method, u)
	if err != nil {
		d.stop()
		return nil, err
	}
	if mk != nil {
		mk(req)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		err = d.explain(ctx, err)
		d.stop()
		return nil, err
	}
	resp.Body = &deadlineBody{rc: resp.Body, d: d, ctx: ctx}
	return resp, nil
}

// progressDeadline cancels a request's context once timeout passes without a restart.
type progressDeadline struct {
	timeout time.Duration
	cancel  context.CancelCauseFunc

	mu    sync.Mutex // guards timer against a restart racing stop
	timer *time.Timer
	done  bool
}

func (d *progressDeadline) expire() {
	d.cancel(fmt.Errorf("%w (%v)", ErrMetaTimeout, d.timeout))
}

func (d *progressDeadline) restart() {
	d.mu.Lock()
	if !d.done && d.timer.Stop() {
		d.timer.Reset(d.timeout)
	}
	d.mu.Unlock()
}

func (d *progressDeadline) stop() {
	d.mu.Lock()
	d.done = true
	d.timer.Stop()
	d.mu.Unlock()
	d.cancel(nil)
}

// explain replaces the transport's "context canceled" by the reason the deadline
// cancelled ctx, so a silent origin reads as a timeout (EIO), not as an interrupted
// caller (EINTR).
// The transport's own header timeout is the same length and may fire first; it is the
// same timeout, so it reads the same.
func (d *progressDeadline) explain(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrMetaTimeout) {
		return cause
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w (%v): %v", ErrMetaTimeout, d.timeout, err)
	}
	return err
}

// deadlineBody restarts the deadline on every read that brings bytes, and stops it on
// Close.
type deadlineBody struct {
	rc  io.ReadCloser
	d   *progressDeadline
	ctx context.Context
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.d.restart()
	}
	if err != nil && err != io.EOF {
		err = b.d.explain(b.ctx, err)
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	err := b.rc.Close()
	b.d.stop()
	return err
}
