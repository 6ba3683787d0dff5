package peer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
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
	log    *slog.Logger
	stats  counters

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
	s := &Source{origin: origin, opts: o, client: o.Client, signer: NewSigner(o.Secret),
		hedge: newHedger(o), log: o.Logger}
	if s.client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = idleConnsPerPeer
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

// Stat implements source.Source: metadata always comes from the origin.
func (s *Source) Stat(ctx context.Context, path string) (source.Entry, error) {
	return s.origin.Stat(ctx, path)
}

// List implements source.Source.
func (s *Source) List(ctx context.Context, path string) ([]source.Entry, error) {
	return s.origin.List(ctx, path)
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

// Owns reports whether this node owns the block of path's version v at off by its own
// ring. The server answers only for blocks it owns.
func (s *Source) Owns(path string, v source.Version, off int64) bool {
	m, ok := s.currentRing().Owner(s.key(path, v, off))
	return ok && m.Name == s.opts.Self
}

func (s *Source) key(path string, v source.Version, off int64) BlockKey {
	return BlockKey{Source: s.opts.SourceID, Path: path, Version: versionName(v), Block: off / s.opts.BlockSize}
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
		return s.openOrigin(ctx, path, r, want)
	}
	ring := s.currentRing()
	if first := s.nextRun(ring, path, want, r.Off, end); first.self && first.end == end {
		return s.openOrigin(ctx, path, r, want)
	}
	b, err := s.newBody(ctx, ring, path, r.Off, end, want)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return b, nil
}

// openOrigin opens r at the origin, timing its first byte for the hedge.
func (s *Source) openOrigin(ctx context.Context, path string, r source.Range, want source.Version) (source.Body, error) {
	start := time.Now()
	b, err := s.origin.OpenRange(ctx, path, r, want)
	if err == nil {
		s.hedge.originAnswered(time.Since(start))
		s.stats.originRuns.Add(1)
	}
	return b, err
}

// run is a stretch of consecutive blocks with one owner.
type run struct {
	off, end int64
	owner    Member
	self     bool // owned by this node: read from the origin
}

// maxRunBlocks caps a run's length so that a range this node owns end to end (a cluster
// of one, or a peer's read) is still planned in bounded steps; a longer run of one owner
// simply continues in the next run.
const maxRunBlocks = 256

// nextRun is the run of [off, end) of path's version want that starts at off: the
// blocks from off on with the owner of off's block, up to maxRunBlocks of them.
func (s *Source) nextRun(ring *Ring, path string, want source.Version, off, end int64) run {
	bs := s.opts.BlockSize
	owner := func(b int64) (Member, bool) {
		m, ok := ring.Owner(s.key(path, want, b))
		return m, !ok || m.Name == s.opts.Self
	}
	m, self := owner(off)
	r := run{off: off, end: min(off/bs*bs+bs, end), owner: m, self: self}
	for n := 1; r.end < end && n < maxRunBlocks; n++ {
		m2, self2 := owner(r.end)
		if self2 != self || m2.Name != m.Name {
			break
		}
		r.end = min(r.end+bs, end)
	}
	return r
}

func (r run) String() string { return fmt.Sprintf("[%d,%d)@%s", r.off, r.end, r.owner.Name) }
