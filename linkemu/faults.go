package linkemu

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"
)

// Faults: a link can break the connections it carries, the way real networks and
// middleboxes do, so tests can prove a client retries or fails in bounded time. The
// modes follow toxiproxy's toxics of the same names (reset_peer, timeout, limit_data,
// slicer, slow_close). They live here rather than in a toxiproxy in front of the link
// because the link already owns both sockets of every connection, and a test gets
// faults and the shared-bandwidth model from one proxy without a control server.
//
// A fault acts on the target-to-client direction (responses), where a client notices
// it mid-body; it strikes once After bytes of that direction were delivered on the
// connection. It is fixed when a connection is accepted: SetFault changes what new
// connections get, never connections already open.

// FaultKind names a fault mode.
type FaultKind int

const (
	// FaultNone delivers everything.
	FaultNone FaultKind = iota
	// FaultResetPeer delivers After bytes, then resets the client's connection (RST:
	// the client's next read fails with "connection reset by peer").
	FaultResetPeer
	// FaultTimeout delivers After bytes, then nothing more, and never closes: the
	// client waits until its own timeout (toxiproxy's timeout toxic with timeout 0).
	FaultTimeout
	// FaultLimitData delivers After bytes, then closes both sides cleanly (FIN): a body
	// cut short without an error from the network.
	FaultLimitData
	// FaultSlicer delivers everything, in writes of 1 to SliceBytes bytes with
	// SliceDelay between them: a client must reassemble bodies from tiny reads.
	FaultSlicer
	// FaultSlowClose delivers After bytes, then holds the connection silent for
	// CloseDelay before closing it (FIN): a cut body whose end the client sees late.
	FaultSlowClose
)

var faultNames = map[FaultKind]string{
	FaultNone: "none", FaultResetPeer: "reset_peer", FaultTimeout: "timeout",
	FaultLimitData: "limit_data", FaultSlicer: "slicer", FaultSlowClose: "slow_close",
}

func (k FaultKind) String() string {
	if s, ok := faultNames[k]; ok {
		return s
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// Fault describes what SetFault injects.
type Fault struct {
	Kind FaultKind
	// After is how many response bytes (headers included) a connection delivers before
	// the fault strikes. Zero strikes before the first byte. Ignored by FaultSlicer.
	After int64
	// SliceBytes is FaultSlicer's largest write; zero means 1 KiB. Slices are 1 to
	// SliceBytes long, chosen by a fixed sequence so a failure replays.
	SliceBytes int
	// SliceDelay is FaultSlicer's pause between two writes; zero means none.
	SliceDelay time.Duration
	// CloseDelay is how long FaultSlowClose holds the connection before closing.
	CloseDelay time.Duration
	// Conns is how many connections accepted from now on get the fault; zero means
	// every one until the next SetFault.
	Conns int
}

// errFault is what the proxy's writer sees once a fault has cut the connection.
var errFault = errors.New("linkemu: connection cut by an injected fault")

// defaultSliceBytes is FaultSlicer's largest write when SliceBytes is zero: smaller
// than any HTTP header block, so even a response's headers arrive in pieces.
const defaultSliceBytes = 1 << 10

// SetFault makes connections accepted from now on fail as f describes; Fault{} turns
// faults off. It returns the fault it replaced.
func (l *Link) SetFault(f Fault) Fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.fault
	l.fault, l.faultConns = f, f.Conns
	return old
}

// Faulted is how many connections were given a fault since Start.
func (l *Link) Faulted() int64 { return l.faulted.Load() }

// nextFault returns the fault for a connection being accepted. l.mu must be held.
func (l *Link) nextFault() Fault {
	f := l.fault
	if f.Kind == FaultNone {
		return f
	}
	if f.Conns > 0 {
		l.faultConns--
		if l.faultConns <= 0 {
			l.fault = Fault{}
		}
	}
	l.faulted.Add(1)
	return f
}

// faultConn is the client's socket as the target-to-client writer sees it: Write
// delivers until the fault strikes, then acts it out.
type faultConn struct {
	net.Conn
	f    Fault
	pc   *proxyConn
	sent int64 // bytes delivered; only the one writer goroutine touches it
	seq  uint32
}

func (fc *faultConn) Write(p []byte) (int, error) {
	if fc.f.Kind == FaultSlicer {
		return fc.slice(p)
	}
	if left := fc.f.After - fc.sent; int64(len(p)) <= left {
		n, err := fc.Conn.Write(p)
		fc.sent += int64(n)
		return n, err
	}
	n := 0
	if left := fc.f.After - fc.sent; left > 0 {
		var err error
		n, err = fc.Conn.Write(p[:left])
		fc.sent += int64(n)
		if err != nil {
			return n, err
		}
	}
	fc.strike()
	return n, errFault
}

// CloseWrite passes the target's end of the response on (the writer half-closes dst
// once the target is done).
func (fc *faultConn) CloseWrite() error {
	if cw, ok := fc.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// strike acts the fault out once its bytes were delivered; the connection is torn
// down when it returns.
func (fc *faultConn) strike() {
	switch fc.f.Kind {
	case FaultResetPeer:
		if tc, ok := fc.Conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close sends RST, not FIN
		}
	case FaultTimeout:
		<-fc.pc.done // until the client gives up (or the link closes)
	case FaultSlowClose:
		t := time.NewTimer(fc.f.CloseDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-fc.pc.done:
		}
	}
	fc.pc.teardown()
}

// slice writes p in pieces of 1 to SliceBytes bytes.
func (fc *faultConn) slice(p []byte) (int, error) {
	most := fc.f.SliceBytes
	if most <= 0 {
		most = defaultSliceBytes
	}
	n := 0
	for n < len(p) {
		fc.seq = fc.seq*1664525 + 1013904223 // a fixed LCG: the same slices every run
		k := min(1+int(fc.seq>>8)%most, len(p)-n)
		w, err := fc.Conn.Write(p[n : n+k])
		n += w
		if err != nil {
			return n, err
		}
		if fc.f.SliceDelay > 0 && n < len(p) {
			t := time.NewTimer(fc.f.SliceDelay)
			select {
			case <-t.C:
			case <-fc.pc.done:
				t.Stop()
				return n, errFault
			}
		}
	}
	fc.sent += int64(n)
	return n, nil
}

// faultState is a Link's fault configuration, kept apart from the link model's fields.
type faultState struct {
	fault      Fault        // guarded by Link.mu
	faultConns int          // guarded by Link.mu: connections left for fault.Conns
	faulted    atomic.Int64 // connections given a fault
}
