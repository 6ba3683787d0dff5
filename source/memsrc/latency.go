package memsrc

import (
	"context"
	"time"

	"github.com/playhead/playhead/source"
)

// latency delays every call by one round trip.
type latency struct {
	inner source.Source
	rtt   time.Duration
}

// WithLatency returns src with one round trip of rtt added before each Stat, List and
// OpenRange answers; bodies then deliver bytes without further delay (add WithBandwidth
// for that). A call whose ctx ends during the wait returns the ctx error and never
// reaches src.
func WithLatency(src source.Source, rtt time.Duration) source.Source {
	return &latency{inner: src, rtt: rtt}
}

func (l *latency) wait(ctx context.Context) error {
	if l.rtt <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(l.rtt)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *latency) Stat(ctx context.Context, path string) (source.Entry, error) {
	if err := l.wait(ctx); err != nil {
		return source.Entry{}, &source.PathError{Op: "stat", Path: path, Off: -1, Err: err}
	}
	return l.inner.Stat(ctx, path)
}

func (l *latency) List(ctx context.Context, path string) ([]source.Entry, error) {
	if err := l.wait(ctx); err != nil {
		return nil, &source.PathError{Op: "list", Path: path, Off: -1, Err: err}
	}
	return l.inner.List(ctx, path)
}

func (l *latency) OpenRange(ctx context.Context, path string, r source.Range, want source.Version) (source.Body, error) {
	if err := l.wait(ctx); err != nil {
		return nil, &source.PathError{Op: "open", Path: path, Off: r.Off, Err: err}
	}
	return l.inner.OpenRange(ctx, path, r, want)
}

func (l *latency) String() string { return l.inner.String() + "+rtt=" + l.rtt.String() }
