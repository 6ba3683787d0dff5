package memsrc

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/playhead/playhead/source"
)

// SlowStart shapes bodies as TCP's congestion window does on a long link: each body
// runs on a connection from a pool, and a connection sends at most its window per round
// trip, doubling the window every round trip up to MaxWindow. A body read to its end
// returns its connection to the pool with the window it reached; the next OpenRange
// takes the connection that went idle last (Go's HTTP client does the same), and a
// connection idle longer than IdleReset starts again from InitialWindow, as Linux does
// after a retransmission timeout without traffic (tcp_slow_start_after_idle). A body
// closed before its end loses its connection, as an HTTP/1.1 client must.
//
// It models what the link emulators of the bench have no notion of, so that fetcher
// tests can tell a refill on a warm connection from one on a cold one without a kernel.
type SlowStart struct {
	RTT           time.Duration // one round of the window
	InitialWindow int64         // bytes a fresh connection sends in its first round trip
	MaxWindow     int64         // the window stops growing here, bytes per round trip
	IdleReset     time.Duration // idle this long, a connection starts again from InitialWindow
}

// SlowStartSource is a source shaped by SlowStart; it counts the bodies that started
// from InitialWindow.
type SlowStartSource struct {
	inner source.Source
	o     SlowStart

	mu    sync.Mutex
	idle  []*ssConn // connections back in the pool, the last one idle the shortest
	opens int
	cold  int
}

type ssConn struct {
	window int64
	since  time.Time // idle since, or last round's start while in use
}

// WithSlowStart returns src with its bodies shaped as o says. It panics on options
// that cannot describe a link.
func WithSlowStart(src source.Source, o SlowStart) *SlowStartSource {
	if o.RTT <= 0 || o.InitialWindow <= 0 || o.MaxWindow < o.InitialWindow || o.IdleReset <= 0 {
		panic(fmt.Sprintf("memsrc: slow start %+v: RTT, InitialWindow and IdleReset must be positive, MaxWindow at least InitialWindow", o))
	}
	return &SlowStartSource{inner: src, o: o}
}

// Opens is how many bodies were opened; Cold how many of them started from
// InitialWindow (a new connection, or one idle past IdleReset).
func (s *SlowStartSource) Opens() (opens, cold int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens, s.cold
}

func (s *SlowStartSource) Stat(ctx context.Context, path string) (source.Entry, error) {
	return s.inner.Stat(ctx, path)
}

func (s *SlowStartSource) List(ctx context.Context, path string) ([]source.Entry, error) {
	return s.inner.List(ctx, path)
}

func (s *SlowStartSource) OpenRange(ctx context.Context, path string, r source.Range, want source.Version) (source.Body, error) {
	body, err := s.inner.OpenRange(ctx, path, r, want)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	s.mu.Lock()
	var c *ssConn
	if n := len(s.idle); n > 0 {
		c, s.idle = s.idle[n-1], s.idle[:n-1]
	}
	s.opens++
	if c == nil || now.Sub(c.since) > s.o.IdleReset {
		c = &ssConn{window: s.o.InitialWindow}
		s.cold++
	}
	s.mu.Unlock()
	c.since = now
	end := int64(-1) // open-ended: its end is its EOF
	if r.Len >= 0 {
		end = r.Off + r.Len
	}
	return &ssBody{inner: body, src: s, c: c, g: newGuard(ctx, path), pos: r.Off, end: end, left: c.window}, nil
}

func (s *SlowStartSource) String() string {
	return fmt.Sprintf("%s+slowstart(%v,%d..%d)", s.inner.String(), s.o.RTT, s.o.InitialWindow, s.o.MaxWindow)
}

// ssBody sends at most its connection's window per round trip.
type ssBody struct {
	inner source.Body
	src   *SlowStartSource
	c     *ssConn
	g     *guard
	pos   int64
	end   int64 // where the range ends; -1 when open-ended
	left  int64 // bytes the current round may still send
	// eof: read to its end. Set after Read's last change to c, so a Close racing a
	// Read (a stalled body is closed from another goroutine) hands back a connection
	// nobody changes any more.
	eof  atomic.Bool
	once sync.Once
}

func (b *ssBody) Read(p []byte) (int, error) {
	if err := b.g.err(b.pos); err != nil {
		return 0, err
	}
	if b.eof.Load() {
		return 0, io.EOF
	}
	o := b.src.o
	if b.left == 0 {
		// The round's window is spent: the next round starts a round trip after this
		// one, with the window doubled, or from InitialWindow if the reader let the
		// connection go quiet past IdleReset.
		next := b.c.since.Add(o.RTT)
		if d := time.Until(next); d > 0 {
			if err := b.sleep(d); err != nil {
				return 0, err
			}
		}
		now := time.Now()
		if now.Sub(next) > o.IdleReset {
			b.c.window = o.InitialWindow
		} else {
			b.c.window = min(2*b.c.window, o.MaxWindow)
		}
		b.c.since, b.left = now, b.c.window
	}
	p = p[:min(int64(len(p)), b.left)]
	n, err := b.inner.Read(p)
	b.left -= int64(n)
	b.pos += int64(n)
	if err == io.EOF || (b.end >= 0 && b.pos >= b.end) {
		b.eof.Store(true)
	}
	return n, err
}

func (b *ssBody) sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-b.g.ctx.Done():
		return b.g.err(b.pos)
	}
}

// Close returns the connection to the pool when the body was read to its end.
func (b *ssBody) Close() error {
	b.once.Do(func() {
		if b.eof.Load() {
			b.c.since = time.Now()
			b.src.mu.Lock()
			b.src.idle = append(b.src.idle, b.c)
			b.src.mu.Unlock()
		}
		b.g.close()
	})
	return b.inner.Close()
}

func (b *ssBody) Version() source.Version { return b.inner.Version() }
