package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync/atomic"
	"time"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/readahead/pace"
	"github.com/playhead/playhead/source"
)

// rangeStream is one range request to the origin, read in order one block at a time by its
// own goroutine.
type rangeStream struct {
	fl      *File
	bounded bool // the range was asked with an end: its bytes are sent, not streamed
	tail    bool // a head read's tail, fetched beside it (tail.go)
	// limit is the end of the stretch one tier serves from the stream's first block
	// (runbounds.go): reqEnd never passes it, so neither does any range it opens.
	limit int64

	// Guarded by fl.mu.
	owner Owner
	run   bool // a sequential run's read-ahead range, not split: a refill may continue it
	// reqEnd is where the stream stops: the end of its range (the file size for an
	// open-ended stream). A refill of its run may move it further (continue): the body
	// open now still ends where it was asked to, and the stream asks for the rest when it
	// gets there. Never past limit.
	reqEnd   int64
	next     int64     // offset of the next body byte; block aligned
	want     int64     // read the body up to here, then pause
	stopped  bool      // the file was released or the stream failed; the goroutine exits
	firstAt  time.Time // when the first block arrived (zero until then)
	firstOff int64     // that block's offset
	rate     float64   // the run's rate at its last claim, bytes/s (run streams; 0: unknown)
	// heldRate is the rate the open body's receive window was last bounded for
	// (boundReceive); 0 while it is not bounded.
	heldRate float64

	lastHeld bool // the last block read came from a HeldBody that holds it; the goroutine's own

	// body is the range's open body (nil while none is open), for takeSent and
	// followReader. Guarded by fl.mu; the goroutine alone reads and closes it.
	body source.Body
	// sentOnly: the stream ends where the bytes its sender was already allowed end (its
	// reqEnd, set by takeSent) and its window stays at the least. Guarded by fl.mu.
	sentOnly bool

	// The goroutine's own: the timing of the stream's first range (Fetcher.ramp, pace.go).
	opened   bool      // the stream has opened a range: later ones are not new ranges
	rampAt   time.Time // when the first range was answered; zero when not (or no longer) timed
	rampMid  time.Time // when it had delivered pace.RampBytes
	rampFrom int64     // where it began

	wakeCh chan struct{} // capacity 1: "want or stopped changed"
}

func (s *rangeStream) wake() {
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

// startRangeStream registers a new stream at off (block aligned) and starts its goroutine.
// Its reqEnd may be less than asked (the stretch ends sooner). When the file already has
// MaxRangeStreams range streams, the least useful idle one is stopped.
// Caller holds fl.mu.
func (fl *File) startRangeStream(owner Owner, off, reqEnd int64, bounded bool) *rangeStream {
	if len(fl.rangeStreams) >= fl.f.opts.MaxRangeStreams {
		var victim *rangeStream
		for _, s := range fl.rangeStreams {
			if s.next >= s.want && (victim == nil || s.next < victim.next) {
				victim = s
			}
		}
		if victim != nil {
			// An idle stream holds no claims, so stopping it strands no reader.
			victim.stopped = true
			victim.wake()
			fl.removeRangeStream(victim)
		}
		// With no idle stream the cap is exceeded: every stream is delivering blocks that
		// readers asked for, and refusing a new one would stall this reader.
	}
	// A range ends on a block boundary or at EOF: a stream reads whole blocks, and a
	// range ending inside one would end every attempt at that block in an early EOF.
	// It ends at the stretch's end at the latest (runbounds.go); callers claim blocks
	// only up to the stream's reqEnd, and give the rest to another stream.
	reqEnd = min(fl.blockUp(reqEnd)*fl.bs, fl.size)
	limit := fl.runLimit(off)
	if reqEnd > limit {
		reqEnd, bounded = limit, true // asked with an end now, whatever the caller planned
	}
	s := &rangeStream{fl: fl, owner: owner, next: off, want: off, reqEnd: reqEnd, bounded: bounded,
		limit: limit, wakeCh: make(chan struct{}, 1)}
	fl.rangeStreams = append(fl.rangeStreams, s)
	go s.loop()
	return s
}

// loop is the stream's goroutine: open the range, then deliver blocks while anyone wants
// them, reopening after transient errors until IOTimeout passes without progress.
func (s *rangeStream) loop() {
	fl := s.fl
	f := fl.f
	var (
		body       source.Body
		bodyEnd    int64     // where the open body ends
		stuckSince time.Time // start of the first attempt since the last delivered block
		backoff    = f.opts.RetryMin
	)
	for {
		next, ok := s.waitForWork(body, bodyEnd)
		if !ok {
			fl.mu.Lock()
			fl.finishRangeStream(s, errRetryBlock)
			fl.mu.Unlock()
			s.closeBody(&body, next < bodyEnd)
			return
		}
		if stuckSince.IsZero() {
			stuckSince = time.Now() // IOTimeout counts from the attempt, not its failure
		}
		// A reader may wait IOTimeout for progress, not IOTimeout plus one StallTimeout:
		// this attempt gives up on a silent origin when the time left runs out.
		quiet := min(f.opts.StallTimeout, max(f.opts.IOTimeout-time.Since(stuckSince), minQuiet))
		bb, data, err := s.fetchBlock(&body, &bodyEnd, next, quiet)
		if err == nil {
			stuckSince, backoff = time.Time{}, f.opts.RetryMin
			if s.isStopped() {
				bb.unref()
				continue // released while the block arrived: nobody wants it now
			}
			s.deliver(next, bb, data)
			if next+int64(len(data)) >= bodyEnd {
				// Read to its end: the connection goes back to the pool, and a
				// continued stream asks for its rest on it while its window is open.
				s.closeBody(&body, false)
			}
			continue
		}
		s.closeBody(&body, true)
		s.stopRamp() // the retry's wait is not the range's start
		if err = s.backOff(err, next, stuckSince, &backoff); err == nil {
			continue
		}
		s.fail(next, err)
		return
	}
}

// fetchBlock reads the block at next from body, opening the range there first when body
// is nil (and setting *bodyEnd to where it ends).
func (s *rangeStream) fetchBlock(body *source.Body, bodyEnd *int64, next int64, quiet time.Duration) (*blockBuf, []byte, error) {
	if *body == nil {
		b, end, err := s.open(next, quiet)
		if err != nil {
			return nil, nil, err
		}
		*body, *bodyEnd = b, end
		s.fl.mu.Lock()
		s.body = b
		if rate := s.runRate(); rate > 0 {
			// What the connection advertised before is the sender's already; from here
			// on the window opens no further than the bound.
			s.boundReceive(b, rate, next)
		}
		s.fl.mu.Unlock()
	}
	return s.readBlock(*body, next, quiet)
}

// closeBody closes *body, if open. A range dropped early (an open-ended one usually
// costs its connection) prepares a spare connection, so the next seek pays one round
// trip, not two.
func (s *rangeStream) closeBody(body *source.Body, early bool) {
	if *body == nil {
		return
	}
	s.fl.mu.Lock()
	s.body, s.heldRate = nil, 0
	s.fl.mu.Unlock()
	(*body).Close()
	*body = nil
	if early {
		if w, ok := s.fl.f.src.(Warmer); ok {
			go func() { _ = w.Warm(context.Background()) }()
		}
	}
}

// backOff handles a failed attempt at next: for a transient error with time left before
// IOTimeout (counted from stuckSince) it sleeps *backoff, doubles it, and returns nil to
// retry; otherwise it returns the error to fail the stream with.
func (s *rangeStream) backOff(err error, next int64, stuckSince time.Time, backoff *time.Duration) error {
	f := s.fl.f
	if errors.Is(err, source.ErrNotFound) {
		// The object this File was opened on is gone: for its handles that is a
		// change of the object (ESTALE), not a missing name.
		err = fmt.Errorf("%w: no longer at the origin (%w)", source.ErrChanged, err)
	}
	if source.IsPermanent(err) && !errors.Is(err, errStalled) {
		return err
	}
	left := f.opts.IOTimeout - time.Since(stuckSince)
	if left <= 0 {
		return fmt.Errorf("%w (origin made no progress for %v)", err, f.opts.IOTimeout)
	}
	f.stats.retries.Add(1)
	f.log.Debug("origin error, retrying", "path", s.fl.path, "off", next, "err", err, "backoff", *backoff)
	// Never sleep past the deadline: the last attempt happens at IOTimeout.
	if !s.sleep(min(*backoff, left)) {
		return errRetryBlock // stopped while backing off
	}
	*backoff = min(2**backoff, f.opts.RetryMax)
	return nil
}

// fail ends the stream on err: its claimed blocks fail with it (errRetryBlock: their
// readers claim them again). An object found changed has its cached blocks dropped and
// the mount told.
func (s *rangeStream) fail(next int64, err error) {
	fl, f := s.fl, s.fl.f
	fl.mu.Lock()
	drop := errors.Is(err, source.ErrChanged) && fl.changed(err)
	if !errors.Is(err, errRetryBlock) {
		f.log.Warn("fetch failed", "path", fl.path, "off", next, "err", err)
	}
	fl.finishRangeStream(s, err)
	fl.mu.Unlock()
	if drop {
		f.notifyChange(fl.path)
		fl.dropCache(err)
	}
}

// errStalled marks a range we gave up on because the origin went quiet; it is retried
// even though the cancellation that ended it reads as permanent.
var errStalled = errors.New("origin stalled")

func (s *rangeStream) isStopped() bool {
	s.fl.mu.Lock()
	defer s.fl.mu.Unlock()
	return s.stopped
}

// waitForWork blocks until the stream should read the block at next, returning ok=false
// when it should exit: stopped, finished, or idle past IdleClose. A stream without an open
// body (nothing on the wire) exits at once when idle. bodyEnd is where the open body ends.
func (s *rangeStream) waitForWork(body source.Body, bodyEnd int64) (next int64, ok bool) {
	fl := s.fl
	haveBody := body != nil
	var idle *time.Timer
	defer func() {
		if idle != nil {
			idle.Stop()
		}
	}()
	for {
		fl.mu.Lock()
		next, want, stopped := s.next, s.want, s.stopped
		// A range with little left is read to its end even when nobody claimed the rest
		// (its read-ahead was cut short, or its reader seeked away): those bytes are on
		// their way already, and finishing is what gives the connection back to the pool
		// instead of holding it idle and then dropping it.
		finish := !stopped && haveBody && next < bodyEnd && bodyEnd-next <= fl.f.opts.ReadThrough && s.bounded
		if !stopped && next < want || finish {
			fl.mu.Unlock()
			return next, true
		}
		if stopped || next >= s.reqEnd || !haveBody {
			fl.removeRangeStream(s)
			fl.mu.Unlock()
			return next, false
		}
		if !s.sentOnly {
			// Under mu, so that takeSent's bound is not undone by one worked out before it.
			s.boundReceive(body, s.runRate(), next)
		}
		fl.mu.Unlock()
		s.stopRamp() // paused for claims: the time would be its readers', not the range's
		if idle == nil {
			idle = time.NewTimer(fl.f.opts.IdleClose)
		}
		select {
		case <-s.wakeCh:
		case <-idle.C:
			fl.mu.Lock()
			if s.next >= s.want {
				s.stopped = true
			}
			fl.mu.Unlock()
		}
	}
}

// boundReceive bounds how far the open body of a sequential run's range may run ahead of
// its reader in the kernel, at pace.ReceiveWindow of the run's rate and the path's round
// trip: when the range opens, whenever the stream pauses for its reader, and at its
// run's claims once it is ahead (followReader). The origin then sends about what the
// reader takes, not as fast as the line lets it, so a range ahead of its player leaves
// the rest of a shared line to the ranges that wait (see pace.ReceiveWindow). rate is 0
// for any other stream (a split part's reader is a copy; a head or tail range is a block
// or two), and 0 lifts a bound set before (the run's rate is no longer known, or the
// range fell behind). Caller holds mu.
func (s *rangeStream) boundReceive(body source.Body, rate float64, next int64) {
	rb, ok := sourceBody[ReceiveBounder](body)
	if !ok {
		return
	}
	s.heldRate = rate
	w, least := int64(0), int64(0)
	if rate > 0 {
		rtt := s.fl.f.path.get(s.fl.f.rtt.get())
		w, least = pace.ReceiveWindow(rate, rtt), pace.KeepUp(rate, rtt)
	}
	if rb.BoundReceive(int(w), int(least)) {
		s.fl.f.log.Debug("range receive window bounded", "path", s.fl.path, "off", next, "bytes", w, "least", least, "rate", rate)
	}
}

// followReader bounds or lifts the receive window of the open body of a run's range at
// a claim of its run, by how far the stream is ahead of reader, the block its reader
// reads (pace.HoldLead): bounded for the run's rate once HoldLead ahead, and again when
// that rate moved by more than an eighth since; lifted when under half of HoldLead, or
// claimed by a run whose rate is not known, while claimed blocks wait for it. A run's
// first range opens before its reader's rate is known and is otherwise bounded only
// from its first pause, which on a shared line comes seconds after that: till then it
// runs at its sender's estimate, ahead or not, and ranges ahead of their players keep
// the line full while the ones that started late wait. A range opened once the rate is
// known is bounded from its opening (fetchBlock), and let go here if it is behind.
// Caller holds mu.
func (s *rangeStream) followReader(reader int64) {
	if s.body == nil || s.sentOnly || !s.run {
		return
	}
	ahead, hold := s.next-reader*s.fl.bs, pace.HoldLead(s.rate)
	switch {
	case s.rate > 0 && ahead >= hold && (s.heldRate == 0 || math.Abs(s.rate-s.heldRate) > s.heldRate/8):
		s.boundReceive(s.body, s.rate, s.next)
	case s.heldRate > 0 && s.next < s.want && (s.rate <= 0 || ahead < hold/2):
		// Behind, or taken over by a run whose rate is not known yet: a reader that
		// seeked a short skip forward reads through this range, and held at the old
		// run's pace the skip would take seconds.
		s.boundReceive(s.body, 0, s.next)
	}
}

// sleep waits d or until the stream is stopped; it reports whether to go on.
func (s *rangeStream) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-s.wakeCh:
			s.fl.mu.Lock()
			stopped := s.stopped
			s.fl.mu.Unlock()
			if stopped {
				return false
			}
		}
	}
}

// minQuiet is the shortest wait an attempt gets for its origin, so that the last attempt
// before IOTimeout still has a chance on a healthy origin.
const minQuiet = 10 * time.Millisecond

// open opens the range from off to the stream's end, giving up if the origin does not
// answer within quiet. It returns the body and where it ends.
func (s *rangeStream) open(off int64, quiet time.Duration) (source.Body, int64, error) {
	fl := s.fl
	fl.f.stats.requests.Add(1)
	fl.mu.Lock()
	want, end, claimed := fl.version, s.reqEnd, s.want
	fl.mu.Unlock()
	r := source.Range{Off: off, Len: end - off}
	if end >= fl.size {
		r.Len = -1 // open-ended: the origin streams until we stop reading
	}
	// The context lives as long as the body (sources tie bodies to it); the timer only
	// bounds the wait for the origin's answer.
	ctx, cancel := context.WithCancel(context.Background())
	answered := time.AfterFunc(quiet, cancel)
	fl.f.log.Debug("open range", "path", fl.path, "off", off, "len", r.Len)
	t0 := time.Now()
	body, err := fl.f.src.OpenRange(ctx, fl.path, r, want)
	fl.f.log.Debug("range answered", "path", fl.path, "off", off, "after", time.Since(t0), "err", err)
	if err == nil {
		fl.f.rtt.observe(time.Since(t0))
		fl.f.path.observe(time.Now(), time.Since(t0))
		fl.f.opts.Observer.OriginAnswered(time.Since(t0))
	}
	if !answered.Stop() {
		// Our timer cancelled the request: the error says "context canceled", which
		// would read as permanent; it is a slow origin, so retry.
		if err == nil {
			body.Close()
		}
		err = fmt.Errorf("%w: origin did not answer within %v", errStalled, quiet)
	}
	if err != nil {
		cancel()
		return nil, 0, &source.PathError{Op: "open range", Path: fl.path, Off: off, Err: err}
	}
	if err := fl.learnETag(body.Version()); err != nil {
		body.Close()
		cancel()
		return nil, 0, err
	}
	s.timeRamp(off, claimed)
	return cancelBody{body, cancel}, end, nil
}

// runRate is the rate boundReceive caps the stream's range for: its run's, for a run's own
// range; 0 for any other. Caller holds fl.mu.
func (s *rangeStream) runRate() float64 {
	if !s.run {
		return 0
	}
	return s.rate
}

// cancelBody releases the body's context when it is closed.
type cancelBody struct {
	source.Body
	cancel context.CancelFunc
}

func (b cancelBody) Close() error {
	err := b.Body.Close()
	b.cancel()
	return err
}

// sourceBody is the source's body inside body (a cancelBody, as open returns) as a T: a
// capability the source's bodies may have (ReceiveBounder, SentTeller).
func sourceBody[T any](body source.Body) (T, bool) {
	cb, ok := body.(cancelBody)
	if !ok {
		var zero T
		return zero, false
	}
	t, ok := cb.Body.(T)
	return t, ok
}

// heldFrom is HeldBody.HeldFrom of the wrapped body; false for a body that cannot tell.
func (b cancelBody) heldFrom(off int64) bool {
	h, ok := b.Body.(HeldBody)
	return ok && h.HeldFrom(off)
}

// readBlock reads the block at off from body into a pooled buffer (the caller gets its
// reference), aborting the body if no byte arrives within first, or after a byte within
// StallTimeout or IOTimeout, whichever is shorter.
func (s *rangeStream) readBlock(body source.Body, off int64, first time.Duration) (*blockBuf, []byte, error) {
	fl := s.fl
	n := fl.blockLen(off / fl.bs)
	bb := fl.f.getBuf()
	data := bb.b[:n]
	var stalled atomic.Bool
	stall := time.AfterFunc(first, func() { stalled.Store(true); body.Close() })
	defer stall.Stop()
	quiet := min(fl.f.opts.StallTimeout, fl.f.opts.IOTimeout)
	got := 0
	bb.sum, bb.held = 0, false
	// A block that will not be cached needs no checksum. Whether it is held elsewhere
	// shows once it is read; the stream's last block is the guess (a stream reads one
	// owner's run), and a wrong guess costs one pass over the block.
	sum := fl.f.sums != nil && !s.lastHeld
	for got < len(data) {
		m, err := body.Read(data[got:])
		if sum {
			bb.sum = cache.Checksum(bb.sum, data[got:got+m]) // while the bytes are in the CPU cache
		}
		got += m
		fl.f.stats.bytesFetched.Add(int64(m))
		if m > 0 {
			stall.Reset(quiet)
		}
		if err != nil {
			if got == len(data) {
				break
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			if stalled.Load() {
				if got == 0 {
					quiet = first
				}
				err = fmt.Errorf("%w: no byte for %v (%v)", errStalled, quiet, err)
			}
			bb.unref()
			return nil, nil, &source.PathError{Op: "read", Path: fl.path, Off: off + int64(got), Err: err}
		}
	}
	cb, _ := body.(cancelBody)
	bb.held = cb.heldFrom(off)
	s.lastHeld = bb.held
	if fl.f.sums != nil && !sum && !bb.held {
		bb.sum = cache.Checksum(0, data)
	}
	return bb, data, nil
}

// deliver hands the block read at off to its waiters and queues it for the cache. The
// block stays visible as a landed pending entry until it is in the cache, so nobody
// fetches it again meanwhile; a held one is not written, and stays visible as a kept
// entry while its readers have not taken all of it (landHeld). It takes over the
// caller's reference to bb.
func (s *rangeStream) deliver(off int64, bb *blockBuf, data []byte) {
	fl := s.fl
	b := off / fl.bs
	fl.mu.Lock()
	p := fl.pending[b]
	mustLand := true // nobody has these bytes yet
	switch {
	case p != nil && p.owner == s:
		mustLand = p.waiters == 0
		p.data, p.buf, p.owner = data, bb, nil
		close(p.done)
	case p == nil && !fl.f.store.Has(fl.key, b):
		// Read through without a claim: keep the bytes anyway.
		p = &pending{data: data, buf: bb, done: closedChan}
		fl.pending[b] = p
	default:
		p = nil // cached already, or another stream owns it
		bb.unref()
	}
	now := time.Now()
	if s.firstAt.IsZero() {
		s.firstAt, s.firstOff = now, off
	}
	s.next = off + int64(len(data))
	direct := s.fast(now)
	fl.mu.Unlock()
	s.rampDone(off+int64(len(data)), now, bb.held)
	fl.f.delivered.Add(int64(len(data)))
	fl.delivered.Add(int64(len(data)))
	switch {
	case p == nil:
	case bb.held && fl.landHeld(b, p):
		fl.f.stats.blocksHeld.Add(1) // not written here (writer.go)
	default:
		if bb.held && fl.f.sums != nil {
			bb.sum = cache.Checksum(0, data) // skipped as it arrived (readBlock)
		}
		fl.f.queueWrite(fl, b, p, mustLand, direct)
	}
}

// fast reports a stream that has delivered, on average since its first block, at
// Options.DirectWriteRate or more: its blocks may be written direct (writer.go). The
// first block's bytes came before firstAt, so they are not counted. Caller holds fl.mu.
func (s *rangeStream) fast(now time.Time) bool {
	got := s.next - s.firstOff - s.fl.bs
	elapsed := now.Sub(s.firstAt)
	rate := s.fl.f.opts.DirectWriteRate
	return rate >= 0 && got >= directMinBytes && elapsed > 0 && float64(got) >= rate*elapsed.Seconds()
}

// closedChan is the done channel of blocks that are complete from the start.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// busyRange reports whether owner has a bounded range still delivering more than it
// delivers in one round trip, or not answered yet (pace.Busy). Caller holds fl.mu.
func (fl *File) busyRange(owner Owner, now time.Time) bool {
	var buf [8]pace.InFlight
	ranges := buf[:0]
	for _, s := range fl.rangeStreams {
		if s.owner != owner || !s.bounded || s.stopped || s.next >= s.want {
			continue
		}
		ranges = append(ranges, pace.InFlight{FirstAt: s.firstAt, FirstOff: s.firstOff, Next: s.next, Want: s.want})
	}
	return pace.Busy(now, fl.f.rtt.get(), fl.bs, ranges)
}

// rangeStreamFor finds an open stream that will deliver offset of block a soon: its next byte
// is at or before it and it is at most ReadThrough past what the stream reads anyway.
func (fl *File) rangeStreamFor(a int64) *rangeStream {
	off := a * fl.bs
	var best *rangeStream
	for _, s := range fl.rangeStreams {
		if s.stopped || s.next > off || off >= s.reqEnd || off > s.want+fl.f.opts.ReadThrough {
			continue
		}
		if best == nil || s.next > best.next {
			best = s
		}
	}
	return best
}

// finishRangeStream completes every block s still claims with err and removes s.
// errRetryBlock makes waiters claim the block again. Caller holds mu.
func (fl *File) finishRangeStream(s *rangeStream, err error) {
	for b, p := range fl.pending {
		if p.owner == s {
			p.err = err
			close(p.done)
			delete(fl.pending, b)
			if !errors.Is(err, errRetryBlock) {
				fl.failed[b] = failure{err: err, until: time.Now().Add(failMemory), demanded: p.waiters > 0}
				if p.waiters > 0 {
					fl.f.stats.failures.Add(1)
				}
			}
		}
	}
	fl.removeRangeStream(s)
}

func (fl *File) removeRangeStream(s *rangeStream) {
	s.stopped = true
	for i, o := range fl.rangeStreams {
		if o == s {
			fl.rangeStreams = append(fl.rangeStreams[:i], fl.rangeStreams[i+1:]...)
			break
		}
	}
}

func (fl *File) stopRangeStreams() {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, s := range fl.rangeStreams {
		s.stopped = true
		s.wake()
	}
	fl.released = true
	fl.expireKept(time.Time{}, true, true)
	for b, p := range fl.pending {
		if p.waiters == 0 {
			delete(fl.pending, b)
		}
	}
}
