package httpsrc

import (
	"context"
	"net"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// spareConns keeps spareTarget idle keep-alive connections ready. A range that finds no idle
// connection pays a TCP (and TLS) handshake on top of its request: two round trips
// instead of one, 400 ms instead of 200 on a long link. That happens exactly when it
// hurts: a player's read-ahead opening while its first range is still arriving, or a seek
// right after the previous stream's connection was dropped. So whenever a range leaves no
// connection idle, a HEAD is sent in the background; it dials a connection that then
// waits in the pool for the next range.
type spareConns struct {
	open    atomic.Int64 // connections dialed and not yet closed
	inUse   atomic.Int64 // ranges open (from request to body close)
	warming atomic.Bool  // a warm-up HEAD is in flight
}

// spareTarget is how many idle connections a source keeps ready beyond those in use:
// two, plus one for every spareEvery ranges open. A player starting or seeking opens
// three or four ranges within a few hundred milliseconds (its seek fetch, then read-ahead
// ranges as its window and lead ramp up); many players at once each move on to their
// next range now and then. A range that finds no idle connection pays a second round
// trip.
const (
	spareTarget = 2
	spareEvery  = 4
)

func (sc *spareConns) target() int64 { return spareTarget + sc.inUse.Load()/spareEvery }

// spareWarmTimeout bounds a background warm-up: long enough for a slow handshake, short
// enough that a dead origin does not pile up goroutines.
const spareWarmTimeout = 15 * time.Second

// countDials wraps a dial function so the connections it makes are counted.
func (sc *spareConns) countDials(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		sc.open.Add(1)
		return &countedConn{Conn: c, sc: sc}, nil
	}
}

type countedConn struct {
	net.Conn
	sc   *spareConns
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.sc.open.Add(-1) })
	return c.Conn.Close()
}

// busy records a range opening and returns the function that records its end. If no
// connection is idle for it, the range dials, and a spare is warmed beside it at once.
// Otherwise the range's request checks once it holds its connection (gotConn): a warm-up
// sent now would race the range for the idle connection, and a range that lost would
// pay the dial the spare was there to save.
func (sc *spareConns) busy(s *Source) (done func()) {
	if sc.inUse.Add(1) > sc.open.Load() {
		sc.check(s)
	}
	var once sync.Once
	return func() { once.Do(func() { sc.inUse.Add(-1) }) }
}

// gotConn is the check of a range whose request now holds a connection.
func (sc *spareConns) gotConn(s *Source) func(httptrace.GotConnInfo) {
	return func(httptrace.GotConnInfo) { sc.check(s) }
}

// check warms a spare when the ranges open leave fewer than spareTarget connections
// idle. It runs when a range holds its connection (or is requested, when it must dial)
// and again when its answer arrives.
func (sc *spareConns) check(s *Source) {
	if sc.open.Load()-sc.inUse.Load() < sc.target() && sc.warming.CompareAndSwap(false, true) {
		go func() {
			defer sc.warming.Store(false)
			sc.warm(s, 1)
		}()
	}
}

// fill makes sure at least n connections are open, by sending n HEADs at the same time:
// concurrent requests cannot share a connection, so each one beyond the idle ones dials.
func (sc *spareConns) fill(s *Source, n int) {
	if !sc.warming.CompareAndSwap(false, true) {
		return
	}
	defer sc.warming.Store(false)
	if int(sc.open.Load()) < n {
		sc.warm(s, n)
	}
}

func (sc *spareConns) warm(s *Source, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), spareWarmTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.Warm(ctx)
		}()
	}
	wg.Wait()
}
