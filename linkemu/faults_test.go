package linkemu

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rawGet sends one HTTP/1.1 GET of the whole file over a new connection to addr and
// returns everything the connection delivered (headers and body), how the read ended
// and how long it took. The connection is closed on return.
func rawGet(t *testing.T, addr string, deadline time.Duration) ([]byte, error, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	c.SetDeadline(start.Add(deadline))
	if _, err := io.WriteString(c, "GET /file HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	_, err = got.ReadFrom(c)
	return got.Bytes(), err, time.Since(start)
}

func TestFaults(t *testing.T) {
	const (
		size  = 300_000
		after = 50_000
	)
	o := newOrigin(t, size)
	l, url := startLink(t, o, Options{})
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/file")
	body := func(resp []byte) []byte {
		_, b, _ := bytes.Cut(resp, []byte("\r\n\r\n"))
		return b
	}

	t.Run("reset_peer", func(t *testing.T) {
		l.SetFault(Fault{Kind: FaultResetPeer, After: after})
		got, err, _ := rawGet(t, addr, 5*time.Second)
		if !errors.Is(err, syscall.ECONNRESET) || len(got) > after {
			t.Errorf("got %d bytes, %v; want at most %d, then a reset", len(got), err, after)
		}
	})
	t.Run("limit_data", func(t *testing.T) {
		l.SetFault(Fault{Kind: FaultLimitData, After: after})
		got, err, _ := rawGet(t, addr, 5*time.Second)
		if err != nil || len(got) != after {
			t.Errorf("got %d bytes, %v; want exactly %d, then EOF", len(got), err, after)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		l.SetFault(Fault{Kind: FaultTimeout, After: after})
		got, err, took := rawGet(t, addr, 300*time.Millisecond)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || len(got) != after {
			t.Errorf("got %d bytes, %v after %v; want %d, then silence", len(got), err, took, after)
		}
	})
	t.Run("slow_close", func(t *testing.T) {
		const delay = 200 * time.Millisecond
		l.SetFault(Fault{Kind: FaultSlowClose, After: after, CloseDelay: delay})
		got, err, took := rawGet(t, addr, 5*time.Second)
		if err != nil || len(got) != after || took < delay {
			t.Errorf("got %d bytes, %v after %v; want %d, then EOF after %v", len(got), err, took, after, delay)
		}
	})
	t.Run("slicer", func(t *testing.T) {
		l.SetFault(Fault{Kind: FaultSlicer, SliceBytes: 700, SliceDelay: 10 * time.Microsecond})
		got, err, _ := rawGet(t, addr, 10*time.Second)
		if err != nil || !bytes.Equal(body(got), o.data) {
			t.Errorf("got %d body bytes, %v; want the whole file", len(body(got)), err)
		}
	})
	t.Run("conns", func(t *testing.T) {
		// Only the next connection fails; the one after is whole again.
		l.SetFault(Fault{Kind: FaultLimitData, After: 10, Conns: 1})
		if got, _, _ := rawGet(t, addr, 5*time.Second); len(got) != 10 {
			t.Errorf("first connection: %d bytes, want 10", len(got))
		}
		if got, err, _ := rawGet(t, addr, 5*time.Second); err != nil || !bytes.Equal(body(got), o.data) {
			t.Errorf("second connection: %d body bytes, %v; want the whole file", len(body(got)), err)
		}
	})
	l.SetFault(Fault{})
	// Every faulted connection is gone once its client closed.
	for start := time.Now(); l.Stats().Open != 0 && time.Since(start) < 2*time.Second; {
		time.Sleep(10 * time.Millisecond)
	}
	if st := l.Stats(); st.Open != 0 || l.Faulted() != 6 {
		t.Errorf("after the faults: %d connections open, %d faulted; want 0 and 6", st.Open, l.Faulted())
	}
}
