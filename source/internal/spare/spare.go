// Package spare keeps idle keep-alive connections ready for a source's next range, for
// every source that reaches its origin through net/http (httpsrc, and blobsrc through
// the transports it gives the cloud SDKs).
package spare

import (
	"context"
	"net"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// Conns keeps spareTarget idle keep-alive connections ready. A range that finds no idle
// connection pays a TCP (and TLS) handshake on top of its request: two round trips
// instead of one, 400 ms instead of 200 on a long link. That happens exactly when it
// hurts: a player's read-ahead opening while its first range is still arriving, or a seek
// right after the previous stream's connection was dropped. So whenever a range leaves no
// connection idle, a HEAD is sent in the background; it dials a connection that then
// waits in the pool for the next range.
//
// The source gives the warm-up request (a cheap HEAD that reads its answer to the end,
// so the connection goes back to the pool), dials through CountDials, marks each range
// with Busy and GotConn, and calls Check when a range's answer arrives.
type Conns struct {
	open    atomic.Int64 // connections dialed and not yet closed
	inUse   atomic.Int64 // ranges open (from request to body close)
	warming atomic.Bool  // a warm-up HEAD is in flight
	closed  atomic.Bool  // Close was called: no more warm-ups
	refill  atomic.Bool  // an Abandoned check is scheduled: later ones wait for it
	warm1   func(ctx context.Context) error

	// Pre-dialed connections (Prepare): TCP connections made ahead of the ranges that
	// will need them, handed to the transport's next dials.
	mu      sync.Mutex
	dial    func(ctx context.Context, network, addr string) (net.Conn, error) // the transport's, seen by CountDials
	network string                                                            // of the last dial
	addr    string                                                            // of the last dial
	stash   []predialed
}

type predialed struct {
	c       net.Conn
	network string
	addr    string
	at      time.Time
}

// stashMaxAge bounds how long a pre-dialed connection waits for a request: servers drop
// connections that sent nothing after a while (a few seconds to a minute), and a request
// sent on one they dropped would fail.
const stashMaxAge = 3 * time.Second

// New returns the spare-connection keeper of a source whose warm-up request is warm.
func New(warm func(ctx context.Context) error) *Conns { return &Conns{warm1: warm} }

// Warming reports whether a warm-up is in flight (for tests).
func (sc *Conns) Warming() bool { return sc.warming.Load() }

// spareTarget is how many idle connections a source keeps ready beyond those in use:
// two, plus one for every spareEvery ranges open. A player starting or seeking opens
// three or four ranges within a few hundred milliseconds (its seek fetch, then read-ahead
// ranges as its window and lead ramp up); many players at once each move on to their
// next range now and then. A range that finds no idle connection pays a second round
// trip.
const (
	// Target is the spares kept with no range open; a source starts with Target+1
	// (Fill): its first range and that range's read-ahead follow within milliseconds.
	Target      = 2
	spareTarget = Target
	spareEvery  = 4
)

func (sc *Conns) target() int64 { return spareTarget + sc.inUse.Load()/spareEvery }

// spareWarmTimeout bounds a background warm-up: long enough for a slow handshake, short
// enough that a dead origin does not pile up goroutines.
const spareWarmTimeout = 15 * time.Second

// countDials wraps a dial function so the connections it makes are counted.
func (sc *Conns) CountDials(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if c := sc.takePredialed(network, addr); c != nil {
			return c, nil
		}
		sc.mu.Lock()
		sc.dial, sc.network, sc.addr = dial, network, addr
		sc.mu.Unlock()
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		sc.open.Add(1)
		return &countedConn{Conn: c, sc: sc}, nil
	}
}

// Predial makes sure about n connections are open by dialing the missing ones now, TCP
// only, in the background; the transport's next dials take them (CountDials) instead of
// waiting for a handshake. A warm-up HEAD (Fill) would hold each connection for a round
// trip more, so n ranges opened a round trip later would dial anyway. A connection not
// taken within stashMaxAge is closed.
func (sc *Conns) Predial(n int) {
	sc.mu.Lock()
	dial, network, addr := sc.dial, sc.network, sc.addr
	sc.mu.Unlock()
	need := n - int(sc.open.Load())
	if dial == nil || need <= 0 {
		return // no dial seen yet (the origin's address is not known), or enough open
	}
	for range need {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), stashMaxAge)
			defer cancel()
			c, err := dial(ctx, network, addr)
			if err != nil {
				return
			}
			sc.open.Add(1)
			sc.mu.Lock()
			sc.stash = append(sc.stash, predialed{c: &countedConn{Conn: c, sc: sc}, network: network, addr: addr, at: time.Now()})
			sc.mu.Unlock()
			time.AfterFunc(stashMaxAge, sc.expire)
		}()
	}
}

// takePredialed returns a fresh pre-dialed connection to addr, or nil.
func (sc *Conns) takePredialed(network, addr string) net.Conn {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for i, p := range sc.stash {
		if p.network == network && p.addr == addr && time.Since(p.at) < stashMaxAge {
			sc.stash = append(sc.stash[:i], sc.stash[i+1:]...)
			return p.c
		}
	}
	return nil
}

// expire closes the pre-dialed connections nobody took in time.
func (sc *Conns) expire() {
	sc.mu.Lock()
	keep := sc.stash[:0]
	var old []net.Conn
	for _, p := range sc.stash {
		if time.Since(p.at) < stashMaxAge {
			keep = append(keep, p)
		} else {
			old = append(old, p.c)
		}
	}
	sc.stash = keep
	sc.mu.Unlock()
	for _, c := range old {
		c.Close()
	}
}

// abandonSettle is how long after a body closed early its connection is taken as gone:
// the transport closes it in its own goroutine once Close returns, within microseconds;
// 20 ms is far below a round trip worth saving.
const abandonSettle = 20 * time.Millisecond

// Abandoned records that a range's body was closed before its end. Its connection cannot
// go back to the pool (the rest of the body is still on the wire), so the transport
// closes it, and nothing else notices the pool fell below target. Once that close has
// settled, the missing connections are pre-dialed (Predial: TCP only, taken by the next
// ranges' dials), not warmed with HEADs, which would hold the idle connections left for
// a round trip. A demuxer that closes its file with ranges in flight and is opened again
// at once (a run per seek, a media server's next probe) would otherwise pay a handshake,
// a round trip, for its first range.
//
// A file closed with several ranges in flight abandons them together: one check counts
// every lost connection once (Predial dials what is missing when it runs, and the dials
// of a second check would add to those not yet done).
func (sc *Conns) Abandoned() {
	if !sc.refill.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(abandonSettle, func() {
		sc.refill.Store(false)
		if !sc.closed.Load() {
			sc.Predial(int(sc.inUse.Load() + sc.target()))
		}
	})
}

// Close closes the pre-dialed connections not taken; no warm-up starts after it.
func (sc *Conns) Close() {
	sc.closed.Store(true)
	sc.mu.Lock()
	old := sc.stash
	sc.stash = nil
	sc.mu.Unlock()
	for _, p := range old {
		p.c.Close()
	}
}

type countedConn struct {
	net.Conn
	sc   *Conns
	once sync.Once
}

// NetConn is the connection counted (as tls.Conn.NetConn), for options set on its socket.
func (c *countedConn) NetConn() net.Conn { return c.Conn }

func (c *countedConn) Close() error {
	c.once.Do(func() { c.sc.open.Add(-1) })
	return c.Conn.Close()
}

// Busy records a range opening and returns the function that records its end. If no
// connection is idle for it, the range dials, and a spare is warmed beside it at once.
// Otherwise the range's request checks once it holds its connection (gotConn): a warm-up
// sent now would race the range for the idle connection, and a range that lost would
// pay the dial the spare was there to save.
func (sc *Conns) Busy() (done func()) {
	if sc.inUse.Add(1) > sc.open.Load() {
		sc.Check()
	}
	var once sync.Once
	return func() { once.Do(func() { sc.inUse.Add(-1) }) }
}

// Trace adds to ctx the check of a range whose request now holds a connection.
func (sc *Conns) Trace(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { sc.Check() }})
}

// Check warms a spare when the ranges open leave fewer than the target connections
// idle. It runs when a range holds its connection (or is requested, when it must dial)
// and again when its answer arrives. One warm-up at a time: each holds an idle
// connection for a round trip if it finds one, and a range that then finds none pays
// the dial the spare was there to save.
func (sc *Conns) Check() {
	if sc.closed.Load() {
		return
	}
	if sc.open.Load()-sc.inUse.Load() < sc.target() && sc.warming.CompareAndSwap(false, true) {
		go func() {
			defer sc.warming.Store(false)
			sc.warm(1)
		}()
	}
}

// Fill makes sure at least n connections are open, by sending n HEADs at the same time:
// concurrent requests cannot share a connection, so each one beyond the idle ones dials.
func (sc *Conns) Fill(n int) {
	if !sc.warming.CompareAndSwap(false, true) {
		return
	}
	defer sc.warming.Store(false)
	if int(sc.open.Load()) < n {
		sc.warm(n)
	}
}

func (sc *Conns) warm(n int) {
	ctx, cancel := context.WithTimeout(context.Background(), spareWarmTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = sc.warm1(ctx)
		}()
	}
	wg.Wait()
}
