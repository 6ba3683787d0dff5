package httpsrc

import (
	"context"
	"io"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
)

// clamp is the window clamp of the socket b's answer arrives on.
func clamp(t *testing.T, b *body) int {
	t.Helper()
	tc := b.conn.c.Load()
	if tc == nil {
		t.Fatal("the body has no connection")
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var gerr error
	if err := raw.Control(func(fd uintptr) { n, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_WINDOW_CLAMP) }); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	return n
}

// nextCap bounds the bytes waiting and on their way: the window is the bound less the
// backlog, never under minCap; it restores the cap it found when lifted or when the
// bound is as wide; it leaves an uncapped window no wider than wanted alone, and a cap
// within a quarter of the one wanted.
func TestNextCap(t *testing.T) {
	const M = 1 << 20
	for _, c := range []struct {
		n, unread, cur, restore, want int
	}{
		{M, 0, 20 * M, 0, M},          // a pooled connection's wide window
		{M, M / 2, 20 * M, 0, M / 2},  // half the bound waits already
		{M, 2 * M, 20 * M, 0, minCap}, // a backlog past the bound: a trickle
		{M, 0, M / 2, 0, 0},           // uncapped and narrower: the kernel's own
		{M, 0, M * 9 / 8, 20 * M, 0},  // within a quarter of the cap set
		{4 * M, 0, M, 20 * M, 4 * M},  // the rate rose
		{0, 0, M, 20 * M, -1},         // lifted
		{0, 0, M, 0, 0},               // nothing to lift
		{32 * M, 0, M, 20 * M, -1},    // as wide as before the cap
		{M, M - minCap/2, 20 * M, 0, minCap},
	} {
		if got := nextCap(c.n, c.unread, c.cur, c.restore); got != c.want {
			t.Errorf("nextCap(n %d, unread %d, cur %d, restore %d) = %d, want %d", c.n, c.unread, c.cur, c.restore, got, c.want)
		}
	}
}

// On a real socket, BoundReceive caps the window at no more than the bound, lifting it
// gives back the cap the socket had, the bytes still arrive right, and by the body's
// end the cap is gone for the next range on the pooled connection; an ended body leaves
// the connection alone.
func TestBoundReceive(t *testing.T) {
	o := newTestOrigin(t)
	const size = 16 << 20
	f := o.add("/big.bin", 5, size)
	s := newSource(t, o.URL+"/")
	rb, err := s.OpenRange(context.Background(), "big.bin", source.Range{Off: 0, Len: -1}, f.version())
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	b := rb.(*body)
	data := make([]byte, size)
	if _, err := io.ReadFull(b, data[:4<<20]); err != nil {
		t.Fatal(err)
	}
	// A wide window, as the kernel's tuning gives a fast connection (how wide it has
	// grown by now depends on how fast this test read).
	const before = 8 << 20
	if !b.conn.control(func(fd int) {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_WINDOW_CLAMP, before); err != nil {
			t.Fatal(err)
		}
	}) {
		t.Fatal("no socket")
	}
	if got := clamp(t, b); got != before {
		t.Fatalf("window clamp %d after setting %d", got, before)
	}
	const n = 256 << 10
	if !b.BoundReceive(n) {
		t.Fatalf("BoundReceive(%d) with a %d-byte clamp: not applied", n, before)
	}
	if got := clamp(t, b); got > n || got < minCap {
		t.Errorf("window clamp %d after BoundReceive(%d), want %d to %d", got, n, minCap, n)
	}
	if !b.BoundReceive(0) {
		t.Error("BoundReceive(0) did not lift the cap")
	}
	if got := clamp(t, b); got != before {
		t.Errorf("window clamp %d after the cap was lifted, want the %d it had", got, before)
	}
	if !b.BoundReceive(n) {
		t.Fatalf("BoundReceive(%d) again: not applied", n)
	}
	if _, err := io.ReadFull(b, data[4<<20:]); err != nil {
		t.Fatal(err)
	}
	if err := pattern.Verify(5, data, 0); err != nil {
		t.Fatal(err)
	}
	// Given back before the last read; the kernel's tuning may have set its own clamp
	// since, as it does when it grows the buffer, but never the range's cap.
	if got := clamp(t, b); got <= n {
		t.Errorf("window clamp %d after the body's last bytes: still capped (%d asked)", got, n)
	}
	if b.BoundReceive(n) {
		t.Error("an ended body capped the window of a connection it gave back")
	}
}
