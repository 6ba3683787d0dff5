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

// A body closed before its end loses its connection: Abandoned warms a spare in its
// place once the close has settled, and nothing warms after Close.
func TestAbandonedRangeIsReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var warms atomic.Int64
		sc := New(func(context.Context) error { warms.Add(1); return nil })
		sc.Abandoned() // no connection open: below target
		time.Sleep(2 * abandonSettle)
		synctest.Wait()
		// None open: a warm-up per spare of the target, at once.
		if n := warms.Load(); n != Target {
			t.Fatalf("%d warm-ups after an abandoned range, want %d", n, Target)
		}
		closed := New(func(context.Context) error { warms.Add(1); return nil })
		closed.Close()
		closed.Abandoned()
		time.Sleep(2 * abandonSettle)
		synctest.Wait()
		if n := warms.Load(); n != Target {
			t.Fatalf("%d warm-ups after Close, want none", n-Target)
		}
	})
}
