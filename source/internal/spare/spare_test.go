package spare

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Predial dials the missing connections ahead of need; the transport's next dials take
// them instead of dialing, and none is dialed before the origin's address is known.
func TestPredialHandsOutDialedConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			defer c.Close()
		}
	}()
	sc := New(func(context.Context) error { return nil })
	defer sc.Close()
	sc.Predial(4)
	if n := len(sc.stash); n != 0 || accepted.Load() != 0 {
		t.Fatalf("dialed before any address was known: stash %d, accepted %d", n, accepted.Load())
	}
	var d net.Dialer
	dial := sc.CountDials(d.DialContext)
	first, err := dial(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	sc.Predial(4) // one open: three more
	waitFor(t, func() bool { sc.mu.Lock(); defer sc.mu.Unlock(); return len(sc.stash) == 3 })
	waitFor(t, func() bool { return accepted.Load() == 4 })
	for range 3 {
		c, err := dial(t.Context(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	time.Sleep(50 * time.Millisecond)
	if n := accepted.Load(); n != 4 {
		t.Fatalf("%d connections accepted, want the 4 dialed: the pre-dialed ones were not taken", n)
	}
	if n := sc.open.Load(); n != 4 {
		t.Fatalf("%d counted open, want 4", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("condition not met in 5 s")
		}
	}
}

// A body closed before its end loses its connection: Abandoned pre-dials the missing
// ones once the close has settled (no warm-up request holds an idle connection), and
// nothing after Close.
func TestAbandonedRangeIsReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var dials atomic.Int64
		fake := func(context.Context, string, string) (net.Conn, error) {
			dials.Add(1)
			c, peer := net.Pipe()
			t.Cleanup(func() { c.Close(); peer.Close() })
			return c, nil
		}
		warms := 0
		sc := New(func(context.Context) error { warms++; return nil })
		if _, err := sc.CountDials(fake)(t.Context(), "tcp", "origin:80"); err != nil {
			t.Fatal(err)
		}
		sc.Abandoned() // one open, none in use: Target wants one more
		time.Sleep(2 * abandonSettle)
		synctest.Wait()
		sc.mu.Lock()
		stashed := len(sc.stash)
		sc.mu.Unlock()
		if n := dials.Load(); n != Target || stashed != Target-1 || warms != 0 {
			t.Fatalf("after an abandoned range: %d dials, %d stashed, %d warm-ups; want %d, %d, 0",
				n, stashed, warms, Target, Target-1)
		}
		sc.Close()
		sc.Abandoned()
		time.Sleep(2 * abandonSettle)
		synctest.Wait()
		if n := dials.Load(); n != Target {
			t.Fatalf("%d dials after Close, want none", n-Target)
		}
	})
}
