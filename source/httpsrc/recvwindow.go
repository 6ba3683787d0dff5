package httpsrc

import (
	"net"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// rangeConn is the connection a range's answer arrives on, captured when its request
// gets one (httptrace.GotConn), so the body can bound the window the socket advertises
// (fetch.ReceiveBounder). It is shared by the request's trace and the body.
type rangeConn struct {
	c atomic.Pointer[net.TCPConn]
	// restore is the socket's window clamp before the body bounded it, to set again when
	// the body is done (0: not bounded). Swapped to 0 by the one who restores.
	restore atomic.Int64
}

// got records the connection, unwrapping the counting and TLS layers around the TCP one.
func (rc *rangeConn) got(c net.Conn) {
	for c != nil {
		switch v := c.(type) {
		case *net.TCPConn:
			rc.c.Store(v)
			return
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return
		}
	}
}

// control runs fn on the connection's socket; false when there is none (closed, or an
// answer not on TCP).
func (rc *rangeConn) control(fn func(fd int)) bool {
	tc := rc.c.Load()
	if tc == nil {
		return false
	}
	raw, err := tc.SyscallConn()
	return err == nil && raw.Control(func(fd uintptr) { fn(int(fd)) }) == nil
}

// bound clamps the window the socket advertises to n bytes (TCP_WINDOW_CLAMP), unless it
// is that small already, and reports whether it did. The clamp, not a smaller receive
// buffer: the kernel never withdraws window it advertised, and bytes the sender was
// allowed must find room, or they are dropped and sent again (tried: with SO_RCVBUF the
// senders of paced ranges retransmitted thousands of segments and timed out). The clamp
// only stops the window from opening again past n as the reader takes the bytes. The
// kernel's buffer tuning raises the clamp again if it grows the buffer, which a paced
// reader does not make it do; the fetcher bounds again at its next pause anyway.
func (rc *rangeConn) bound(n int) bool {
	if n <= 0 {
		return false
	}
	done := false
	rc.control(func(fd int) {
		cur, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_WINDOW_CLAMP)
		if err != nil || cur <= n {
			return
		}
		if unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_WINDOW_CLAMP, n) == nil {
			rc.restore.CompareAndSwap(0, int64(cur))
			done = true
		}
	})
	return done
}

// undo gives the socket back the window clamp it had before the bound, so the next range
// on the pooled connection is not held to this one's pace.
func (rc *rangeConn) undo() {
	if prev := rc.restore.Swap(0); prev > 0 {
		rc.control(func(fd int) { _ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_WINDOW_CLAMP, int(prev)) })
	}
}

// BoundReceive implements fetch.ReceiveBounder: the connection advertises a window of at
// most n bytes from here on (see rangeConn.bound).
func (b *body) BoundReceive(n int) bool {
	return b.conn != nil && b.conn.bound(n)
}
