package memsrc

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/playhead/playhead/source"
)

// Token bucket shape, as fractions of a second of bytes. A Read moves at most
// 1/chunkDivisor s worth, so pacing is smooth; the bucket holds up to 1/burstDivisor s,
// so a reader woken late by the scheduler catches up instead of losing the time (as a
// TCP receive buffer would fill meanwhile).
const (
	chunkDivisor = 100
	burstDivisor = 20
)

// bandwidth limits all bodies of one wrapper to a shared byte rate.
type bandwidth struct {
	inner source.Source
	lim   *rate.Limiter // shared by every body: two bodies split the rate
	chunk int           // most bytes one Read returns
	bps   int64
}

// WithBandwidth returns src with every body's bytes paced so that all bodies of the
// returned source together deliver at most bytesPerSec. A Read returns at most a
// hundredth of a second's worth of bytes. Stat, List and OpenRange are not slowed.
func WithBandwidth(src source.Source, bytesPerSec int64) source.Source {
	if bytesPerSec <= 0 {
		panic(fmt.Sprintf("memsrc: bandwidth %d bytes/s must be positive", bytesPerSec))
	}
	burst := int(max(bytesPerSec/burstDivisor, 1))
	lim := rate.NewLimiter(rate.Limit(bytesPerSec), burst)
	// A new limiter starts with a full bucket; drain it so the start is paced like the
	// rest.
	lim.AllowN(time.Now(), burst)
	chunk := int(max(bytesPerSec/chunkDivisor, 1))
	return &bandwidth{inner: src, lim: lim, chunk: chunk, bps: bytesPerSec}
}

func (b *bandwidth) Stat(ctx context.Context, path string) (source.Entry, error) {
	return b.inner.Stat(ctx, path)
}

func (b *bandwidth) List(ctx context.Context, path string) ([]source.Entry, error) {
	return b.inner.List(ctx, path)
}

func (b *bandwidth) OpenRange(ctx context.Context, path string, r source.Range, want source.Version) (source.Body, error) {
	body, err := b.inner.OpenRange(ctx, path, r, want)
	if err != nil {
		return nil, err
	}
	return &pacedBody{inner: body, bw: b, g: newGuard(ctx, path), pos: r.Off}, nil
}

func (b *bandwidth) String() string { return fmt.Sprintf("%s+bw=%dB/s", b.inner.String(), b.bps) }

type pacedBody struct {
	inner source.Body
	bw    *bandwidth
	g     *guard
	pos   int64
}

func (p *pacedBody) Read(buf []byte) (int, error) {
	if err := p.g.err(p.pos); err != nil {
		return 0, err
	}
	if len(buf) > p.bw.chunk {
		buf = buf[:p.bw.chunk]
	}
	n, err := p.inner.Read(buf)
	if n > 0 {
		// Pay for the bytes actually read, after reading them: the bucket never holds
		// tokens for bytes that were not delivered.
		if werr := p.wait(n); werr != nil {
			return 0, werr
		}
		p.pos += int64(n)
	}
	return n, err
}

// wait blocks until n tokens are available, Close is called or ctx ends. It does not use
// Limiter.WaitN, which fails at once when ctx's deadline is nearer than the wait.
func (p *pacedBody) wait(n int) error {
	res := p.bw.lim.ReserveN(time.Now(), n)
	d := res.Delay()
	if d == 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-p.g.ctx.Done():
		res.Cancel()
		return p.g.err(p.pos)
	}
}

func (p *pacedBody) Close() error {
	p.g.close()
	return p.inner.Close()
}

func (p *pacedBody) Version() source.Version { return p.inner.Version() }
