package memsrc

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
)

// ErrClosed is returned by Read on a body that was closed (possibly while the Read was
// blocked in another goroutine).
var ErrClosed = errors.New("memsrc: read on closed body")

// body serves [pos, end) of one immutable object.
type body struct {
	src    *Source
	obj    *object
	path   string
	ctx    context.Context
	closed atomic.Bool
	pos    int64 // next offset to return; owned by the reader
	end    int64
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, &source.PathError{Op: "read", Path: b.path, Off: b.pos, Err: ErrClosed}
	}
	if err := b.ctx.Err(); err != nil {
		return 0, &source.PathError{Op: "read", Path: b.path, Off: b.pos, Err: err}
	}
	if b.pos >= b.end {
		return 0, io.EOF
	}
	if rem := b.end - b.pos; int64(len(p)) > rem {
		p = p[:rem]
	}
	if b.obj.pattern {
		pattern.Fill(b.obj.seed, p, b.pos)
	} else {
		copy(p, b.obj.data[b.pos:])
	}
	b.pos += int64(len(p))
	b.src.bytesServed.Add(int64(len(p)))
	return len(p), nil
}

func (b *body) Close() error {
	b.closed.Store(true)
	return nil
}

func (b *body) Version() source.Version { return b.obj.version }

// guard ties a wrapper's body to a context that Close cancels, so a Read blocked in the
// wrapper (waiting for tokens, or hanging on purpose) returns as soon as another goroutine
// calls Close or the OpenRange ctx is done.
type guard struct {
	ctx    context.Context
	cancel context.CancelFunc
	closed atomic.Bool
	path   string
}

func newGuard(ctx context.Context, path string) *guard {
	ctx, cancel := context.WithCancel(ctx)
	return &guard{ctx: ctx, cancel: cancel, path: path}
}

// err reports why reading must stop, or nil.
func (g *guard) err(off int64) error {
	if g.closed.Load() {
		return &source.PathError{Op: "read", Path: g.path, Off: off, Err: ErrClosed}
	}
	if err := g.ctx.Err(); err != nil {
		return &source.PathError{Op: "read", Path: g.path, Off: off, Err: err}
	}
	return nil
}

func (g *guard) close() {
	g.closed.Store(true)
	g.cancel()
}
