package httpsrc

import (
	"net"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// rangeConn is the connection a range's answer arrives on, captured when its request
// gets one (httptrace.GotConn), so the body can cap the window the socket advertises
// (fetch.ReceiveBounder). It is shared by the request's trace and the body.
type rangeConn struct {
	c  atomic.Pointer[net.TCPConn]
	mu sync.Mutex // serializes bound and undo: the stream's goroutine and a Close elsewhere
	// restore is the socket's window clamp before the body capped it, to set again when
	// the body is done; 0 while not capped. Guarded by mu.
	restore int
	// asked and least are the bound and the least cap of the last bound call with n > 0,
	// and owed the bytes that were waiting unread then, less those read since: once the
	// reader has taken them (owed reaches 0 in drained) the cap, which was narrowed by
	// them, is worked out again for asked and least. Guarded by mu; owed is atomic so
	// that a read checks it without the lock. since counts the bytes read since the cap
	// was last worked out (drained works it out again every reboundEvery).
	asked, least int
	owed         atomic.Int64
	since        atomic.Int64
	// done: the answer's end is being read or the body closed (undo): the connection
	// goes back to the pool, and no bound may cap it again, whichever goroutine asks.
	// Guarded by mu.
	done bool
}

// got records the connection, unwrapping the counting and TLS layers around the TCP one;
// nil when the answer is not on TCP (a retry may have moved the request to such a one).
func (rc *rangeConn) got(c net.Conn) {
	for {
		switch v := c.(type) {
		case *net.TCPConn:
			rc.c.Store(v)
			return
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			rc.c.Store(nil)
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

// bound keeps the range's bytes ahead of its reader in the kernel, waiting unread in the
// socket or on their way, near n as of this call. It caps the window the socket
// advertises (TCP_WINDOW_CLAMP) at n less the bytes waiting unread (SIOCINQ; the
// transport's own 64 KiB read buffer is not counted), at least least and minCap, and
// reports whether it changed the cap; n <= 0 lifts it. least is what the sender needs
// in flight to keep up with the reader (a round trip of its rate): a backlog, however
// large, never holds the sender under its reader's pace, because a sender held under
// it for seconds learns that slower rate (its congestion control measures what the
// window let through) and climbs back over seconds more once the backlog is read, while
// its reader runs through its lead. The window counts from the last byte
// received, so the cap bounds what the sender may send per round trip; the backlog is
// taken off because the sender would otherwise fill the whole buffer at that pace while
// the reader pauses. The caller asks when the range opens, at each pause and at claims
// that find it ahead or behind (fetch's followReader); the body asks again for the same
// n as its reader reads, every reboundEvery bytes and once it has read the backlog this
// call found (drained): so the cap follows the backlog as the reader drains it, and a
// cap narrowed by a backlog does not outlive it (a reader that paused with a backlog as
// large as n and then read on without pausing again, its reader behind it, would keep
// the sender at minCap a round trip, under its own rate). During a long pause the
// backlog may still grow past n by a cap a round trip. The cap, not a smaller buffer:
// the kernel never withdraws window it advertised, and bytes the sender was allowed
// must find room or be dropped and sent again. A cap within a quarter of the one
// wanted is left as it is. The kernel's buffer tuning raises the cap when it grows the
// buffer; the next ask reads the cap back.
func (rc *rangeConn) bound(n, least int) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.boundLocked(n, least)
}

// boundLocked is bound; caller holds mu.
func (rc *rangeConn) boundLocked(n, least int) bool {
	if rc.done {
		return false
	}
	if n <= 0 {
		rc.asked, rc.least = 0, 0 // lifted: drained has nothing to work out again
	}
	if n <= 0 && rc.restore == 0 {
		// Nothing to lift, as nextCap would say: spare the syscalls at every pause of
		// every stream that was never capped.
		return false
	}
	changed := false
	rc.owed.Store(0)
	rc.since.Store(0)
	rc.control(func(fd int) {
		cur, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_WINDOW_CLAMP)
		if err != nil {
			return
		}
		unread, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
		if err != nil {
			unread = 0
		}
		if n > 0 {
			rc.asked, rc.least = n, least
			rc.owed.Store(int64(unread))
		}
		switch w := nextCap(n, least, unread, cur, rc.restore); {
		case w < 0:
			changed = rc.restoreLocked(fd)
		case w > 0:
			if rc.restore == 0 {
				rc.restore = cur
			}
			changed = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_WINDOW_CLAMP, w) == nil
		}
	})
	return changed
}

// drained notes n more bytes read from the connection; when they complete the backlog
// the last bound found, or reboundEvery more since the cap was worked out, it bounds
// again for the same n (see bound).
func (rc *rangeConn) drained(n int) {
	paid := rc.owed.Load() > 0 && rc.owed.Add(int64(-n)) <= 0
	if rc.since.Add(int64(n)) < reboundEvery && !paid {
		return
	}
	rc.since.Store(0)
	// Under one hold of mu: a bound or lift asked from elsewhere in between (a claim
	// that finds the range behind, a split that ends it where its sent bytes end) is
	// not undone by the one read before it.
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.asked > 0 {
		rc.boundLocked(rc.asked, rc.least)
	}
}

// nextCap is the window cap bound sets for a bound of n bytes, at least least, with
// unread bytes waiting, on a socket whose cap is cur and was restore before bound first
// capped it (0: not capped): 0 to leave the cap as it is, -1 to restore it.
func nextCap(n, least, unread, cur, restore int) int {
	w := max(n-unread, least, minCap)
	switch {
	case n <= 0 || restore > 0 && w >= restore:
		if restore > 0 {
			return -1
		}
		return 0
	case restore == 0 && cur <= w: // not capped, and no wider than wanted
		return 0
	case 4*cur >= 3*w && 4*cur <= 5*w:
		return 0
	}
	return w
}

// reboundEvery is how many bytes a reader reads between two workings-out of its cap
// while bounded (drained): the cap was set for the backlog of its moment, and the
// backlog moves as the reader reads and the sender sends. Worked out again each block
// (256 KiB), the bytes waiting and on their way stay near the bound instead of drifting
// under it as the reader drains them or over it as they pile up behind a slow reader.
// Two system calls a block, and a third when the cap moves by more than a quarter.
const reboundEvery = 256 << 10

// minCap is the narrowest window bound sets: a few segments of any link, so the sender
// is slowed, not stalled waiting for a window update (a window under one segment waits
// for the reader to take bytes before the sender may send again).
const minCap = 64 << 10

// undo gives the socket back the cap it had before bound, so the next range on the pooled
// connection is not held to this one's pace (its window then grows back from where the
// cap left it over a few round trips, as any window grows).
func (rc *rangeConn) undo() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.asked, rc.least, rc.done = 0, 0, true
	if rc.restore > 0 {
		rc.control(func(fd int) { rc.restoreLocked(fd) })
	}
}

// restoreLocked sets the saved cap back; caller holds mu, and restore > 0.
func (rc *rangeConn) restoreLocked(fd int) bool {
	prev := rc.restore
	rc.restore = 0
	rc.owed.Store(0)
	return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_WINDOW_CLAMP, prev) == nil
}

// BoundReceive implements fetch.ReceiveBounder: about n bytes of the range at most wait in
// the kernel or on their way (n <= 0: as before), and the window is never capped under
// least; see rangeConn.bound. A body that ended or was closed has given its connection
// back and leaves it alone.
func (b *body) BoundReceive(n, least int) bool {
	return b.conn != nil && !b.ended.Load() && !b.closed.Load() && b.conn.bound(n, least)
}

// Sent implements fetch.SentTeller: the bytes past those the transport has read that the
// sender may already send (rangeConn.sent). A body that ended or was closed cannot tell.
func (b *body) Sent() (int64, bool) {
	if b.conn == nil || b.ended.Load() || b.closed.Load() {
		return 0, false
	}
	return b.conn.sent()
}

// sent is how many bytes past those read from the socket the sender may send before this
// end advertises more window: those received and waiting unread (SIOCINQ) and those the
// window last advertised still allows (tcpi_rcv_wnd). That window counts from the last
// window update, so this may be up to the bytes received since then too many: a few
// segments, which the least cap (minCap) lets through a round trip anyway. A kernel too
// old to report the window reports 0 for it: then only the unread bytes are counted.
func (rc *rangeConn) sent() (n int64, ok bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.control(func(fd int) {
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return
		}
		unread, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
		if err != nil {
			return
		}
		n, ok = int64(unread)+int64(info.Rcv_wnd), true
	})
	return n, ok
}
