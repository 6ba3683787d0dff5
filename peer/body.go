package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/playhead/playhead/source"
)

// ErrClosed is returned by Read on a body that was closed.
var ErrClosed = errors.New("peer: read on closed body")

// body serves a range split into runs: the run being read and up to Ahead runs after
// it are open at once (each on its own request, nearest first), so a sequential reader
// waits for one round trip, not one per run.
//
// Invariant: every byte served is of version ver, the version of the first run. A
// later run is asked for want (the caller's version with the validators the first run
// learned), so the origin refuses another version (ErrChanged) and a peer answers 409.
type body struct {
	s     *Source
	ring  *Ring
	path  string
	ctx   context.Context    // the caller's; Read fails once it is done
	inner context.Context    // every run's request; cancelled by Close
	stop  context.CancelFunc // cancels inner
	want  source.Version     // what later runs ask for
	ver   source.Version     // the version of the bytes served
	end   int64              // end of the range
	next  int64              // start of the first run not yet queued; reader-owned
	// originTo is the end of the last byte served from the origin (0 before any), so
	// every byte served from it on came from an owner (HeldFrom); reader-owned.
	originTo int64

	closed atomic.Bool
	mu     sync.Mutex // guards queue against Close from another goroutine
	queue  []*pending // queue[0] is being read
}

// newBody opens the first run (to learn the version) and queues the runs after it.
func (s *Source) newBody(ctx context.Context, ring *Ring, path string, off, end int64, want source.Version) (*body, error) {
	inner, stop := context.WithCancel(ctx)
	b := &body{s: s, ring: ring, path: path, ctx: ctx, inner: inner, stop: stop, want: want, end: end, next: off}
	b.refill(1)
	first := b.queue[0]
	var err error
	select {
	case <-first.done:
		err = first.result()
	case <-ctx.Done():
		err = &source.PathError{Op: "open", Path: path, Off: off, Err: ctx.Err()}
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	b.ver = first.ver
	b.want = learned(want, first.ver)
	b.refill(1 + s.opts.Ahead)
	return b, nil
}

// learned is want with the validators of served that want did not know.
func learned(want, served source.Version) source.Version {
	if want.ETag == "" {
		want.ETag = served.ETag
	}
	if want.ModTime.IsZero() {
		want.ModTime = served.ModTime
	}
	return want
}

// refill queues runs until n are queued or the range is planned to its end.
func (b *body) refill(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.queue) < n && b.next < b.end && !b.closed.Load() {
		p := &pending{run: b.s.nextRun(b.ring, b.path, b.want, b.next, b.end), done: make(chan struct{})}
		b.next = p.end
		b.queue = append(b.queue, p)
		go b.open(p, b.want)
	}
}

// open opens p's run: from its owner, else (or when the owner fails or is marked
// down) from the origin.
func (b *body) open(p *pending, want source.Version) {
	if !p.self {
		done, err := b.openFromPeer(p, want)
		if done {
			return
		}
		b.s.countBypass(p.owner.Name, err)
		b.s.log.Debug("peer bypassed", "peer", p.owner.Name, "path", b.path, "off", p.off, "err", err)
	}
	rc, err := b.s.openOrigin(b.inner, b.path, source.Range{Off: p.off, Len: p.end - p.off}, want)
	if err != nil {
		p.set(nil, want, false, err)
		return
	}
	p.set(rc, rc.Version(), false, nil)
}

// openFromPeer tries p's owner, unless it is marked down. done says p is set (opened
// from the peer, or failed because the body ended); otherwise err says why the run
// goes to the origin, and the owner's health has been judged by it.
func (b *body) openFromPeer(p *pending, want source.Version) (done bool, err error) {
	h := b.s.health
	if !h.admit(p.owner.Name) {
		return false, errDown
	}
	req := BlockRequest{Source: b.s.opts.SourceID, Path: b.path, Off: p.off, Len: p.end - p.off, Version: want}
	rc, err := b.s.openPeer(b.inner, p.owner, req)
	switch {
	case err == nil:
		h.succeeded(p.owner.Name)
		b.s.stats.peerRuns.Add(1)
		b.s.member(p.owner.Name).runs.Add(1)
		p.set(rc, rc.ver, true, nil) // the version the owner named: learned() takes its ETag
		return true, nil
	case b.inner.Err() != nil:
		h.released(p.owner.Name)
		p.set(nil, want, false, &source.PathError{Op: "open", Path: b.path, Off: p.off, Err: b.inner.Err()})
		return true, nil
	case errors.Is(err, errNotThisVersion), errors.Is(err, errRefused), errors.Is(err, errOwnerOrigin):
		h.succeeded(p.owner.Name) // it answered: alive, only not for this run
	default:
		b.s.memberFailed(p.owner.Name)
	}
	return false, err
}

// Read implements source.Body.
func (b *body) Read(buf []byte) (int, error) {
	for {
		off := b.next
		b.mu.Lock()
		var cur *pending
		if len(b.queue) > 0 {
			cur = b.queue[0]
			off = cur.off + cur.got
		}
		b.mu.Unlock()
		if err := b.readable(off); err != nil {
			return 0, err
		}
		if cur == nil {
			return 0, io.EOF
		}
		n, done, err := b.readRun(cur, buf)
		if done {
			cur.close()
			b.mu.Lock()
			b.queue = b.queue[1:]
			b.mu.Unlock()
			b.refill(1 + b.s.opts.Ahead)
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// readable says why no byte may be read at off, or nil.
func (b *body) readable(off int64) error {
	if b.closed.Load() {
		return &source.PathError{Op: "read", Path: b.path, Off: off, Err: ErrClosed}
	}
	if err := b.ctx.Err(); err != nil {
		return &source.PathError{Op: "read", Path: b.path, Off: off, Err: err}
	}
	return nil
}

// readRun reads from cur into buf. done says cur is read to its end. A peer's answer
// that fails or ends early is continued from the origin where it stopped.
func (b *body) readRun(cur *pending, buf []byte) (n int, done bool, err error) {
	select {
	case <-cur.done:
	case <-b.ctx.Done():
		return 0, false, b.readable(cur.off + cur.got)
	}
	if err := cur.result(); err != nil {
		return 0, false, err
	}
	if !cur.ver.Matches(b.ver) {
		return 0, false, &source.PathError{Op: "read", Path: b.path, Off: cur.off,
			Err: fmt.Errorf("%w: run served %v, body opened %v", source.ErrChanged, cur.ver, b.ver)}
	}
	left := cur.end - cur.off - cur.got
	if int64(len(buf)) > left {
		buf = buf[:left]
	}
	n, err = b.readWatched(cur, buf)
	cur.got += int64(n)
	if cur.fromPeer {
		b.s.stats.peerBytes.Add(int64(n))
		b.s.member(cur.owner.Name).bytes.Add(int64(n))
	} else {
		b.s.stats.originBytes.Add(int64(n))
		if n > 0 {
			b.originTo = cur.off + cur.got
		}
	}
	if cur.got == cur.end-cur.off {
		return n, true, nil
	}
	switch {
	case err == nil:
		return n, false, nil
	case cur.fromPeer && b.readable(cur.off+cur.got) == nil:
		if !errors.Is(err, errHedged) {
			// Cut: the peer or its link failed. A stalled answer is no failure of the
			// peer's: it answered this request, and the next one's headers tell.
			b.s.memberFailed(cur.owner.Name)
		}
		b.s.countBypass(cur.owner.Name, err)
		b.s.log.Debug("peer answer continued from the origin", "peer", cur.owner.Name, "path", b.path, "off", cur.off+cur.got, "err", err)
		b.resume(cur)
		return n, false, nil
	case err == io.EOF:
		err = &source.PathError{Op: "read", Path: b.path, Off: cur.off + cur.got, Err: io.ErrUnexpectedEOF}
	}
	return n, false, err
}

// readWatched reads cur into buf. A peer's answer that delivers nothing for its
// budget is closed, so the read fails with errHedged and the run goes on from the
// origin: a peer that stalls (a host gone without a reset) costs the reader the
// budget, as one that never answers costs the threshold, not the fetcher's stall
// timeout. The budget is hedger.bodyBudget: the owner answered its headers at once and
// may have to fetch the range from its own origin first, a block at a time.
func (b *body) readWatched(cur *pending, buf []byte) (int, error) {
	if !cur.fromPeer {
		return cur.rc.Read(buf)
	}
	budget := b.s.hedge.bodyBudget(cur.owner.Addr)
	var stalled atomic.Bool
	rc := cur.rc
	watch := b.s.hedge.watchPeer(cur.owner.Addr, budget, budget+b.s.opts.HedgeCeiling, nil, func() { stalled.Store(true); rc.Close() })
	n, err := rc.Read(buf)
	if n > 0 {
		b.s.hedge.heardFrom(cur.owner.Addr)
	}
	if !watch.stop() && stalled.Load() {
		// Fired: rc is closed, whatever this read returned.
		err = fmt.Errorf("%w: no byte for %v after %d bytes of the answer", errHedged, budget, cur.got)
	}
	return n, err
}

// resume continues cur from the origin after its peer failed mid-answer.
func (b *body) resume(cur *pending) {
	off := cur.off + cur.got
	rc, err := b.s.openOrigin(b.inner, b.path, source.Range{Off: off, Len: cur.end - off}, b.want)
	cur.mu.Lock()
	defer cur.mu.Unlock()
	cur.rc.Close()
	cur.rc, cur.fromPeer, cur.err = nil, false, err
	if err != nil {
		return
	}
	cur.rc, cur.ver = rc, rc.Version()
	if cur.closed {
		rc.Close()
	}
}

// Close implements source.Body: it ends every run's request.
func (b *body) Close() error {
	b.closed.Store(true)
	b.stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.queue {
		p.close()
	}
	return nil
}

// Version implements source.Body.
func (b *body) Version() source.Version { return b.ver }

// HeldFrom implements fetch.HeldBody: every byte served from off on came from its owner,
// which reads it through its own cache and serves it to any node that asks, so the
// reader need not keep a copy (unless Options.LocalCopy). A run of this node's own, or the rest of
// an owner's answer continued from the origin, is held by no other node: its bytes
// move originTo past them. Called by the body's reader, after the bytes.
func (b *body) HeldFrom(off int64) bool {
	return !b.s.opts.LocalCopy && off >= b.originTo
}

// pending is one run being opened or read.
type pending struct {
	run
	done chan struct{} // closed once opened (or failed)
	got  int64         // bytes read; reader-owned

	mu       sync.Mutex // guards the fields below against close
	rc       io.ReadCloser
	ver      source.Version
	fromPeer bool
	err      error
	closed   bool
}

// set records how the run opened and wakes its reader.
func (p *pending) set(rc io.ReadCloser, v source.Version, fromPeer bool, err error) {
	p.mu.Lock()
	p.rc, p.ver, p.fromPeer, p.err = rc, v, fromPeer, err
	if p.closed && rc != nil {
		rc.Close()
	}
	p.mu.Unlock()
	close(p.done)
}

// result is the run's open error, nil once it can be read.
func (p *pending) result() error {
	select {
	case <-p.done:
	default:
		return errors.New("peer: run not open yet")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil && p.rc == nil {
		return errors.New("peer: run has no body")
	}
	return p.err
}

func (p *pending) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.rc != nil {
		p.rc.Close()
	}
}
