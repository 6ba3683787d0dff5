package pace

import (
	"math"
	"sort"
	"testing"
	"time"
)

// tcpLink is a fake link for the splitter's tests: deterministic, stepped by a fake
// clock, with TCP slow start, because slow start is what a stream count measured over
// a few round trips sees first.
//
// What it models: each connection has a congestion window (bytes per round trip) that
// starts at initCwnd and doubles every round trip in which the window, not the link,
// the caps or the reader, limited it (slow start, no ssthresh). A connection may also
// be capped by a send buffer (connWin bytes per round trip, a sender's tcp_wmem) and by
// a rate (connRate, an object store's per-connection limit). The link's capacity is
// shared max-min fairly between the connections that send (a tbf queue serving them
// alike). A connection's first byte comes a round trip after it is asked to send (the
// range request), and one that sent nothing for longer than rto restarts from
// initCwnd (Linux's tcp_slow_start_after_idle).
//
// What it leaves out: loss. A window the link limits stays where it was, or with cut
// set falls to what the connection got of the link per round trip, as a sender that
// loses packets converges to its share (the connection left when a split ends then
// starts from a sixteenth of the link). Also left out: ACK clocking (bytes flow evenly
// within a round trip), the TCP handshake, the request round trip of every later part
// of split read-ahead, and parts arriving out of order (every byte delivered counts as
// read-ahead the reader can use).
type tcpLink struct {
	rtt      time.Duration
	capacity float64 // bytes/s shared by all connections; 0: unlimited
	connRate float64 // bytes/s of one connection at most; 0: no cap
	connWin  float64 // bytes per round trip of one connection at most; 0: no cap
	cut      bool    // a window the link limits falls to what it got (see above)
	conns    []*tcpConn
}

// initCwnd is Linux's initial window, ten segments of 1460 bytes.
const initCwnd = 10 * 1460

// rto is how long a connection may send nothing and keep its window: a round trip and
// Linux's 200 ms minimum.
func (l *tcpLink) rto() time.Duration { return l.rtt + 200*time.Millisecond }

type tcpConn struct {
	cwnd     float64   // bytes per round trip
	active   bool      // carries one of the reader's streams
	readyAt  time.Time // first byte of its current stream
	lastSend time.Time // zero: never sent
}

// want is the rate c could send at now, bytes/s, by its window and caps; window
// reports that the congestion window is the limit.
func (l *tcpLink) want(c *tcpConn) (rate float64, window bool) {
	rate, window = c.cwnd/l.rtt.Seconds(), true
	if l.connWin > 0 && l.connWin/l.rtt.Seconds() < rate {
		rate, window = l.connWin/l.rtt.Seconds(), false
	}
	if l.connRate > 0 && l.connRate < rate {
		rate, window = l.connRate, false
	}
	return rate, window
}

// step runs the link from now for dt with n streams, of which the reader's read-ahead
// takes at most demand bytes, and returns the bytes delivered. Streams 0..n-1 use
// connections 0..n-1: one kept across steps keeps its window.
func (l *tcpLink) step(now time.Time, dt time.Duration, n int, demand float64) float64 {
	for len(l.conns) < n {
		l.conns = append(l.conns, &tcpConn{})
	}
	var ready []*tcpConn
	for i, c := range l.conns {
		if i >= n {
			c.active = false
			continue
		}
		if !c.active {
			c.active, c.readyAt = true, now.Add(l.rtt)
		}
		if c.lastSend.IsZero() || now.Sub(c.lastSend) > l.rto() {
			c.cwnd = initCwnd
		}
		if !now.Before(c.readyAt) {
			ready = append(ready, c)
		}
	}
	wants := make([]float64, len(ready))
	for i, c := range ready {
		wants[i], _ = l.want(c)
	}
	capacity := math.Inf(1)
	if l.capacity > 0 {
		capacity = l.capacity
	}
	// The reader's demand caps what the link carries this step: a connection held
	// back by it is application-limited, and its window does not grow.
	limit := min(capacity, max(demand, 0)/dt.Seconds())
	got := maxMinShare(wants, limit)
	total := 0.0
	for i, c := range ready {
		rate, window := l.want(c)
		if got[i] > 0 {
			c.lastSend = now.Add(dt)
		}
		switch {
		case window && got[i] >= rate*0.999:
			c.cwnd *= math.Exp2(dt.Seconds() / l.rtt.Seconds())
		case l.cut && limit == capacity && got[i] < rate*0.999:
			c.cwnd = max(min(c.cwnd, got[i]*l.rtt.Seconds()), initCwnd)
		}
		if l.connWin > 0 {
			c.cwnd = min(c.cwnd, l.connWin)
		}
		total += got[i] * dt.Seconds()
	}
	return total
}

// maxMinShare divides capacity between wants max-min fairly: each gets its want or an
// equal share of what the smaller wants left, whichever is less.
func maxMinShare(wants []float64, capacity float64) []float64 {
	idx := make([]int, len(wants))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return wants[idx[a]] < wants[idx[b]] })
	got := make([]float64, len(wants))
	left := capacity
	for k, i := range idx {
		got[i] = min(wants[i], left/float64(len(idx)-k))
		left -= got[i]
	}
	return got
}

// simBlock is the size of one read, the fetcher's block; simStep is the fake clock's
// step.
const (
	simBlock = 256 << 10
	simStep  = 5 * time.Millisecond
	simMaxN  = 16
)

// simReader is a sequential reader of one file open alone.
type simReader struct {
	rate float64 // bytes/s a player reads at; 0: a copy, which reads what has arrived
	lead float64 // bytes its read-ahead keeps requested past its reads at one stream
}

// sim drives a Splitter as the fetcher does, with one reader over a link. Each step
// the link carries the read-ahead over N() streams. What was requested stays
// requested: when N() falls, the split's parts in flight keep their connections until
// what is left of them is within the new count's read-ahead (Claim keeps at most
// MaxLead in them). The reader's reads are placed within the step by when their bytes
// arrived, and each read updates the splitter with cumulative counts (Delivered and
// Own alike: the file is the fetcher's only one). A read waits, and counts as starved
// from the next read on, when its block has not fully arrived as it is issued; the
// first read starts the run and never counts.
type sim struct {
	l       *tcpLink
	r       simReader
	capped  bool
	sp      Splitter
	t0, now time.Time
	arrived float64   // bytes delivered so far
	asked   float64   // bytes requested so far
	streams int       // connections carrying the read-ahead
	k       int64     // block of the reader's pending read
	issueAt time.Time // when read k is issued
	issued  bool      // read k has updated the splitter
	starved int64
	split   time.Duration // time spent with N() > 1
}

func newSim(l *tcpLink, r simReader, capped bool) *sim {
	t0 := time.Unix(0, 0)
	return &sim{l: l, r: r, capped: capped, t0: t0, now: t0, issueAt: t0}
}

// run advances the simulation by d; at is called after every step with the time since
// the start.
func (s *sim) run(d time.Duration, at func(since time.Duration)) {
	for end := s.now.Add(d); s.now.Before(end); {
		n := max(s.sp.N(), 1)
		ahead := s.r.lead
		if n > 1 {
			ahead = max(ahead, MaxLead) // n parts of PartSize (Claim)
		}
		want := float64(s.k+1)*simBlock + ahead
		s.asked = max(s.asked, want)
		if n >= s.streams || s.asked <= want {
			s.streams = n
		}
		before := s.arrived
		got := s.l.step(s.now, simStep, s.streams, s.asked-before)
		s.arrived += got
		s.reads(before, got)
		if n > 1 {
			s.split += simStep
		}
		s.now = s.now.Add(simStep)
		if at != nil {
			at(s.now.Sub(s.t0))
		}
	}
}

// reads issues and completes the reader's reads within the step from s.now, in which
// got bytes arrived evenly after before.
func (s *sim) reads(before, got float64) {
	end := s.now.Add(simStep)
	frac := func(t time.Time) float64 { return min(max(float64(t.Sub(s.now))/float64(simStep), 0), 1) }
	for {
		if !s.issued {
			if s.issueAt.After(end) {
				return
			}
			have := before + got*frac(s.issueAt)
			s.sp.Update(Sample{Now: s.issueAt, RTT: s.l.rtt, Delivered: int64(have), Own: int64(have), Consumed: int64(have),
				Starved: s.starved, MaxN: simMaxN, Solo: true, Capped: s.capped})
			if s.k > 0 && have < float64(s.k+1)*simBlock {
				s.starved++
			}
			s.issued = true
		}
		need := float64(s.k+1) * simBlock
		if before+got < need {
			return
		}
		done := s.issueAt
		if got > 0 {
			done = later(done, s.now.Add(time.Duration((need-before)/got*float64(simStep))))
		}
		next := done
		if s.r.rate > 0 {
			// A player reads at its pace, and after a wait goes on from there.
			next = later(next, s.issueAt.Add(time.Duration(simBlock/s.r.rate*float64(time.Second))))
		}
		s.k, s.issueAt, s.issued = s.k+1, next, false
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// The model itself: one connection on the far link (200 ms, 30 MB/s shared) is in slow
// start for about two seconds; sixteen fill it in about one; a pause longer than the
// retransmission timeout starts the window over.
func TestTCPLinkSlowStart(t *testing.T) {
	rate := func(l *tcpLink, n int, from, to time.Duration) float64 {
		var bytes float64
		for at := time.Duration(0); at < to; at += simStep {
			got := l.step(time.Unix(0, 0).Add(at), simStep, n, math.Inf(1))
			if at >= from {
				bytes += got
			}
		}
		return bytes / (to - from).Seconds()
	}
	far := func() *tcpLink { return &tcpLink{rtt: 200 * time.Millisecond, capacity: 30e6} }
	if r := rate(far(), 1, 400*time.Millisecond, 600*time.Millisecond); r > 4*initCwnd/0.2 {
		t.Errorf("one connection's second round trip: %.0f B/s, want under four initial windows a round trip", r)
	}
	if r := rate(far(), 1, time.Second, 1200*time.Millisecond); r > 0.1*30e6 {
		t.Errorf("one connection at 1 s: %.1f MB/s, want still in slow start", r/1e6)
	}
	if r := rate(far(), 1, 2500*time.Millisecond, 3*time.Second); r < 0.99*30e6 {
		t.Errorf("one connection at 2.5 s: %.1f MB/s, want the whole link", r/1e6)
	}
	if r := rate(far(), 16, 1500*time.Millisecond, 2*time.Second); r < 0.99*30e6 {
		t.Errorf("sixteen connections at 1.5 s: %.1f MB/s, want the whole link", r/1e6)
	}
	l := far()
	rate(l, 1, 0, 3*time.Second)
	l.step(time.Unix(0, 0).Add(3*time.Second), simStep, 1, 0) // the reader has enough
	if got := l.step(time.Unix(0, 0).Add(4*time.Second), simStep, 1, math.Inf(1)); got > 2*initCwnd {
		t.Errorf("after a second idle: %.0f bytes in %v, want a restarted window", got, simStep)
	}
}
