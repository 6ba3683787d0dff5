package fetch

import (
	"context"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// perBody caps every body to its own rate, as an object store caps each connection.
type perBody struct {
	source.Source
	bps int
}

func (p perBody) OpenRange(ctx context.Context, path string, r source.Range, want source.Version) (source.Body, error) {
	b, err := p.Source.OpenRange(ctx, path, r, want)
	if err != nil {
		return nil, err
	}
	return &cappedBody{Body: b, lim: rate.NewLimiter(rate.Limit(p.bps), 64<<10)}, nil
}

type cappedBody struct {
	source.Body
	lim *rate.Limiter
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if len(p) > 64<<10 {
		p = p[:64<<10]
	}
	n, err := c.Body.Read(p)
	if n > 0 {
		c.lim.WaitN(context.Background(), n)
	}
	return n, err
}

// sequentialScan reads the whole file in 1 MiB reads with a 16 MiB read-ahead window.
func sequentialScan(t *testing.T, fx *fixture) {
	t.Helper()
	size := fx.file.Size()
	for off := int64(0); off < size; off += 1 << 20 {
		if err := fx.read(t, off, 1<<20, ahead(1, off+1<<20, min(off+16<<20, size))); err != nil {
			t.Fatal(err)
		}
	}
}

func splitState(fx *fixture) (n, peak int) {
	fx.file.mu.Lock()
	defer fx.file.mu.Unlock()
	return fx.file.split.N(), fx.file.split.Peak()
}

// splitRejected reports whether the controller tried more streams and went back.
func splitRejected(fx *fixture) bool {
	fx.file.mu.Lock()
	defer fx.file.mu.Unlock()
	return fx.file.split.Held()
}

// Connections capped one by one: the read-ahead splits into parallel ranges.
func TestSplitsWhenEachConnectionIsCapped(t *testing.T) {
	if testing.Short() {
		t.Skip("measures real throughput for a few seconds")
	}
	o := openEnded()
	o.PartSize = 1 << 20
	fx := newFixture(t, 40<<20, func(s source.Source) source.Source {
		return perBody{memsrc.WithLatency(s, 10*time.Millisecond), 4 << 20}
	}, o)
	sequentialScan(t, fx)
	if _, peak := splitState(fx); peak < 4 {
		t.Fatalf("per-connection cap: read-ahead split into at most %d streams, want 4 or more", peak)
	}
	if st := fx.mem.Stats(); st.BytesServed > fx.file.Size()*11/10 {
		t.Fatalf("split ranges served %d bytes for a %d-byte file", st.BytesServed, fx.file.Size())
	}
}

// One shared link: splitting is tried once, gains nothing, and is dropped.
func TestNoSplitOnASharedLink(t *testing.T) {
	if testing.Short() {
		t.Skip("measures real throughput for a few seconds")
	}
	o := openEnded()
	o.PartSize = 1 << 20
	fx := newFixture(t, 40<<20, func(s source.Source) source.Source {
		return memsrc.WithBandwidth(memsrc.WithLatency(s, 10*time.Millisecond), 14<<20)
	}, o)
	sequentialScan(t, fx)
	if n, peak := splitState(fx); n != 1 || !splitRejected(fx) {
		t.Fatalf("shared link: split tried up to %d streams, rejected: %v, now %d; want one trial, rejected, back to 1", peak, splitRejected(fx), n)
	}
}
