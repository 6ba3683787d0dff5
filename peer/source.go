package peer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/playhead/playhead/source"
)

// Source reads an origin through the peer tier: each block is read from its owner, or
// from the origin when this node owns it or the owner fails. Safe for concurrent use.
type Source struct {
	origin source.Source
	opts   Options
	client *http.Client
	signer *Signer
	hedge  *hedger
	health *health
	log    *slog.Logger
	stats  counters
	// byMember counts, per member name, what this node read from it (memberstats.go).
	byMember memberTable

	mu      sync.Mutex
	ring    *Ring  // guarded by mu; rebuilt when the membership's generation moves
	ringGen uint64 // guarded by mu
}

var _ source.Source = (*Source)(nil)

// idleConnsPerPeer keeps enough warm connections to each peer for Ahead runs and the
// run being read, for a few readers at once.
const idleConnsPerPeer = 32

// NewSource wraps origin with the peer tier.
func NewSource(origin source.Source, o Options) (*Source, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := &Source{origin: origin, opts: o, client: o.Client, signer: NewMemberSigner(o.Secret, o.Self),
		hedge: newHedger(o), health: newHealth(), log: o.Logger}
	if s.client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = idleConnsPerPeer
		t.Proxy = nil // peers are on the cluster's network: an HTTP(S)_PROXY meant for the origin must not carry them
		s.client = &http.Client{Transport: t}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s, nil
}

// Stats returns the tier's counters.
func (s *Source) Stats() Stats { return s.stats.snapshot() }

// Origin returns the wrapped source.
func (s *Source) Origin() source.Source { return s.origin }

// Stat implements source.Source: metadata always comes from the origin. Its answer
// time is the hedge's first estimate of the origin's (see metaAnswered).
func (s *Source) Stat(ctx context.Context, path string) (source.Entry, error) {
	start := time.Now()
	e, err := s.origin.Stat(ctx, path)
	if err == nil {
		s.hedge.metaAnswered(time.Since(start))
	}
	return e, err
}

// List implements source.Source; timed as Stat is.
func (s *Source) List(ctx context.Context, path string) ([]source.Entry, error) {
	start := time.Now()
	es, err := s.origin.List(ctx, path)
	if err == nil {
		s.hedge.metaAnswered(time.Since(start))
	}
	return es, err
}

// String implements source.Source: the origin's name, since the bytes are the origin's.
func (s *Source) String() string { return s.origin.String() }

// Close closes the origin if it can be closed, and the idle peer connections.
func (s *Source) Close() error {
	s.client.CloseIdleConnections()
	if c, ok := s.origin.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// currentRing returns the ring of the members now.
func (s *Source) currentRing() *Ring {
	ms, gen := s.opts.Members.Members()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ring == nil || gen != s.ringGen {
		s.ring, s.ringGen = NewRing(ms), gen
	}
	return s.ring
}

// Owns reports whether this node owns every block of [off, end) of path's version v by
// its own ring. The server answers only for ranges it owns: a node asks the owner of a
// stretch for that stretch only (fetch cuts its ranges at RunEnd), so a range a node
// does not own end to end is a request from a node whose ring differs.
func (s *Source) Owns(path string, v source.Version, off, end int64) bool {
	ring := s.currentRing()
	if ring.Len() == 0 {
		return false
	}
	for off < end {
		r := s.nextRun(ring, path, v, off, end)
		if !r.self {
			return false
		}
		off = r.end
	}
	return true
}

// RunEnd implements fetch.RunBounds: the end of the run of [off, end) of path's
// version v that starts at off, the stripes from off's on with one owner (this node's
// go to the origin), at most maxRunBytes. fetch opens no range across it, so a block
// this node owns never waits behind one it asked a peer for (doc.go).
func (s *Source) RunEnd(path string, v source.Version, off, end int64) int64 {
	if v.Size >= 0 && end > v.Size {
		end = v.Size
	}
	if v.Size < 0 || off < 0 || off >= end {
		return end // OpenRange sends such a range to the origin whole
	}
	ring := s.currentRing()
	if ring.Len() <= 1 {
		return end // a cluster of one: every run is the origin's
	}
	return s.nextRun(ring, path, v, off, end).end
}

func (s *Source) stripeSize() int64 { return s.opts.BlockSize * s.opts.StripeBlocks }

func (s *Source) key(path string, v source.Version, off int64) BlockKey {
	return BlockKey{Source: s.opts.SourceID, Path: path, Version: versionName(v), Stripe: off / s.stripeSize()}
}

// OpenRange implements source.Source. The range goes to the origin whole when it
// cannot be split by owner: a ctx serving a peer, an unknown version or size, an
// empty range or one at or past the end (the origin gives the edge cases their
// contract), or when this node owns every block of it.
func (s *Source) OpenRange(ctx context.Context, path string, r source.Range, want source.Version) (source.Body, error) {
	end := r.End()
	if want.Size >= 0 && (end < 0 || end > want.Size) {
		end = want.Size
	}
	if IsFromPeer(ctx) || want.Size < 0 || r.Off < 0 || r.Len == 0 || r.Off >= want.Size {
		return s.openWhole(ctx, path, r, want)
	}
	ring := s.currentRing()
	if first := s.nextRun(ring, path, want, r.Off, end); first.self && first.end == end {
		return s.openWhole(ctx, path, r, want)
	}
	b, err := s.newBody(ctx, ring, path, r.Off, end, want)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return b, nil
}

// openWhole opens r at the origin in one run, counting its bytes as a body of runs
// counts those of its origin runs.
func (s *Source) openWhole(ctx context.Context, path string, r source.Range, want source.Version) (source.Body, error) {
	b, err := s.openOrigin(ctx, path, r, want)
	if err != nil {
		return nil, err
	}
	return countedBody{Body: b, n: &s.stats.originBytes}, nil
}

// countedBody adds the bytes read from its body to n.
type countedBody struct {
	source.Body
	n *atomic.Int64
}

func (b countedBody) Read(p []byte) (int, error) {
	n, err := b.Body.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// openOrigin opens r at the origin, timing its first byte and its first block for the
// hedge.
func (s *Source) openOrigin(ctx context.Context, path string, r source.Range, want source.Version) (source.Body, error) {
	start := time.Now()
	b, err := s.origin.OpenRange(ctx, path, r, want)
	if err != nil {
		return nil, err
	}
	s.hedge.originAnswered(time.Since(start))
	s.stats.originRuns.Add(1)
	tb := &timedBody{Body: b, start: start, left: s.opts.BlockSize, h: s.hedge}
	if r.Len >= 0 && r.Len < s.opts.BlockSize {
		tb.left = 0 // a block's time is not measured on less than a block
	}
	return tb, nil
}

// timedBody records in h how long its first left bytes took from start (the open).
type timedBody struct {
	source.Body
	start time.Time
	left  int64 // bytes to the first block's end; <= 0 once recorded or not measured
	h     *hedger
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.Body.Read(p)
	if b.left > 0 {
		if b.left -= int64(n); b.left <= 0 {
			b.h.originBlockDelivered(time.Since(b.start))
		}
	}
	return n, err
}

// run is a stretch of consecutive stripes (or the part of them in a range) with one
// owner.
type run struct {
	off, end int64
	owner    Member
	self     bool // owned by this node: read from the origin
}

// maxRunBytes caps a run's length so that a range this node owns end to end (a peer's
// read) is still planned in bounded steps, and RunEnd looks at a few stripes at most
// under fetch's lock; a longer stretch of one owner simply continues in the next run.
// 64 MiB: 8 stripes of the default 8 MiB, a handful of ring lookups.
const maxRunBytes = 64 << 20

// nextRun is the run of [off, end) of path's version want that starts at off: the
// stripes from off's on with the owner of off's stripe, up to maxRunBytes of them (at
// least one stripe).
func (s *Source) nextRun(ring *Ring, path string, want source.Version, off, end int64) run {
	ss := s.stripeSize()
	owner := func(at int64) (Member, bool) {
		m, ok := ring.Owner(s.key(path, want, at))
		return m, !ok || m.Name == s.opts.Self
	}
	m, self := owner(off)
	r := run{off: off, end: min(off/ss*ss+ss, end), owner: m, self: self}
	for r.end < end && r.end-off < maxRunBytes {
		m2, self2 := owner(r.end)
		if self2 != self || m2.Name != m.Name {
			break
		}
		r.end = min(r.end+ss, end)
	}
	return r
}

func (r run) String() string { return fmt.Sprintf("[%d,%d)@%s", r.off, r.end, r.owner.Name) }
