package linkemu

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// defaultListen is where Start listens when given "": loopback only, any free port.
	defaultListen = "127.0.0.1:0"

	// dialTimeout bounds the proxy's dial to the target, so a dead target fails the
	// client's connection instead of holding it open forever.
	dialTimeout = 10 * time.Second

	// socketBuffer caps the kernel buffers on the proxy's side of both sockets while it
	// emulates. Linux autotunes loopback buffers to several MB; left alone they would
	// hold far more than the link's window and hide backpressure from the origin.
	socketBuffer = 128 << 10
)

// Stats counts a link's traffic. Bytes are counted when delivered to the receiver.
type Stats struct {
	BytesUp   int64 // client to target (requests)
	BytesDown int64 // target to client (responses)
	Accepted  int64 // connections accepted since Start
	Open      int64 // connections open now
}

// Link is a running (or ready to run) emulated link in front of one TCP target.
type Link struct {
	target string
	opts   Options
	up     transmitter // client to target, shared by all connections
	down   transmitter // target to client, shared by all connections

	bytesUp, bytesDown, accepted, open atomic.Int64

	faultState // SetFault (faults.go)

	wg sync.WaitGroup // accept loop and connection goroutines

	mu     sync.Mutex
	ln     net.Listener            // guarded by mu
	conns  map[*proxyConn]struct{} // guarded by mu
	closed bool                    // guarded by mu
}

// New returns a link to target ("host:port") with the given options. It does not listen
// until Start.
func New(target string, opts Options) (*Link, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("linkemu: target %q: %w", target, err)
	}
	return &Link{
		target: target,
		opts:   opts,
		up:     transmitter{rate: opts.Bandwidth},
		down:   transmitter{rate: opts.Bandwidth},
		conns:  make(map[*proxyConn]struct{}),
	}, nil
}

// Options returns the link's options.
func (l *Link) Options() Options { return l.opts }

// Target returns the address the link forwards to.
func (l *Link) Target() string { return l.target }

// Start listens on listenAddr ("" means "127.0.0.1:0") and forwards every accepted
// connection to the target through the emulated link. It returns the address clients
// should dial. Even with no emulation (the "loopback" profile) it proxies, so Stats work
// the same for every profile.
func (l *Link) Start(listenAddr string) (string, error) {
	if listenAddr == "" {
		listenAddr = defaultListen
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return "", errors.New("linkemu: Start after Close")
	}
	if l.ln != nil {
		return "", errors.New("linkemu: already started")
	}
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		return "", fmt.Errorf("linkemu: listen %s: %w", listenAddr, err)
	}
	l.serveLocked(ln)
	return ln.Addr().String(), nil
}

// Serve is Start on a listener the caller made (one in another network namespace, for
// a relay on a kernel-shaped link). The link owns ln from then on and closes it at
// Close, also when Serve fails.
func (l *Link) Serve(ln net.Listener) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.ln != nil {
		ln.Close()
		return "", errors.New("linkemu: Serve after Start or Close")
	}
	l.serveLocked(ln)
	return ln.Addr().String(), nil
}

// serveLocked starts accepting on ln; l.mu is held.
func (l *Link) serveLocked(ln net.Listener) {
	l.ln = ln
	l.wg.Add(1)
	go l.acceptLoop(ln)
}

// Close stops listening, tears down every connection and waits for its goroutines.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	var err error
	if l.ln != nil {
		err = l.ln.Close()
	}
	for c := range l.conns {
		c.teardown()
	}
	l.mu.Unlock()
	l.wg.Wait()
	return err
}

// Stats returns the link's counters.
func (l *Link) Stats() Stats {
	return Stats{
		BytesUp:   l.bytesUp.Load(),
		BytesDown: l.bytesDown.Load(),
		Accepted:  l.accepted.Load(),
		Open:      l.open.Load(),
	}
}

func (l *Link) acceptLoop(ln net.Listener) {
	defer l.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		pc := &proxyConn{link: l, client: c, done: make(chan struct{})}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return
		}
		l.conns[pc] = struct{}{}
		pc.fault = l.nextFault()
		l.wg.Add(1)
		l.mu.Unlock()
		l.accepted.Add(1)
		l.open.Add(1)
		go pc.run()
	}
}

// proxyConn is one client connection and its connection to the target.
type proxyConn struct {
	link   *Link
	client net.Conn
	fault  Fault // set before run

	once     sync.Once
	done     chan struct{} // closed by teardown
	mu       sync.Mutex
	upstream net.Conn // guarded by mu; nil until dialled
	pipes    []*pipe  // guarded by mu
}

// teardown aborts the connection: sockets closed, pipes stopped. Safe to call twice.
func (c *proxyConn) teardown() {
	c.once.Do(func() {
		close(c.done)
		c.client.Close()
		c.mu.Lock()
		if c.upstream != nil {
			c.upstream.Close()
		}
		for _, p := range c.pipes {
			p.stop()
		}
		c.mu.Unlock()
	})
}

func (c *proxyConn) run() {
	l := c.link
	defer func() {
		c.teardown()
		l.mu.Lock()
		delete(l.conns, c)
		l.mu.Unlock()
		l.open.Add(-1)
		l.wg.Done()
	}()

	// The handshake charge: the client's connect returned at once (it is talking to a
	// local listener), so the round trips a real connect would have waited for are paid
	// here, before the request can reach the target.
	if hs := time.Duration(l.opts.HandshakeRTTs) * l.opts.RTT; hs > 0 {
		t := time.NewTimer(hs)
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
			return
		}
	}
	up, err := net.DialTimeout("tcp", l.target, dialTimeout)
	if err != nil {
		return // the client sees its connection closed, as with a refused connect
	}
	if l.opts.Emulates() || l.opts.Relay {
		limitBuffers(up)
	}
	if l.opts.carriesLink() {
		limitBuffers(c.client)
	}

	toTarget := newPipe(c.client, up, l.opts, &l.up, &l.bytesUp, c.done)
	var toClientConn net.Conn = c.client
	if c.fault.Kind != FaultNone {
		toClientConn = &faultConn{Conn: c.client, f: c.fault, pc: c}
	}
	toClient := newPipe(up, toClientConn, l.opts, &l.down, &l.bytesDown, c.done)
	c.mu.Lock()
	c.upstream = up
	c.pipes = []*pipe{toTarget, toClient}
	select {
	case <-c.done: // Close raced with the dial
		c.mu.Unlock()
		up.Close()
		return
	default:
	}
	c.mu.Unlock()

	var wg sync.WaitGroup
	var failed atomic.Bool
	for _, p := range c.pipes {
		wg.Add(2)
		go func() {
			defer wg.Done()
			p.readLoop()
			if p == toTarget && c.fault.Kind != FaultNone {
				// The client closed. HTTP clients never half-close, so it is gone; a
				// faulted response may be stalled with a target that never notices.
				c.teardown()
			}
		}()
		go func() {
			defer wg.Done()
			if !p.writeLoop() && failed.CompareAndSwap(false, true) {
				c.teardown() // a receiver went away: the other direction is moot too
			}
		}()
	}
	wg.Wait()
}

// limitBuffers shrinks the kernel buffers that sit between the emulated window and the two
// endpoints: what the proxy receives from the target and sends to the client, and back.
func limitBuffers(conns ...net.Conn) {
	for _, nc := range conns {
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(socketBuffer)
			_ = tc.SetWriteBuffer(socketBuffer)
		}
	}
}
