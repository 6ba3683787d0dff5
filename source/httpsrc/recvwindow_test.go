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

// BoundReceive clamps the socket's window to the bytes asked, the bytes still arrive
// right, and at the body's end the socket gets back the clamp it had, for the next range
// on the pooled connection. A bound no smaller than the clamp is not applied.
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
	before := clamp(t, b)
	t.Logf("window clamp after 4 MiB: %d", before)
	if b.BoundReceive(before) {
		t.Errorf("clamped a %d-byte window to %d bytes: no smaller, should be left alone", before, before)
	}
	// Two of loopback's 64 KiB segments: a window under one segment stalls the sender
	// (the fetcher's least is pace.MinReceiveWindow, many segments of any link).
	const n = 128 << 10
	if before <= n {
		t.Fatalf("the socket starts with a %d-byte clamp; the test needs more than %d", before, n)
	}
	if !b.BoundReceive(n) {
		t.Fatalf("BoundReceive(%d) with a %d-byte clamp: not applied", n, before)
	}
	if got := clamp(t, b); got != n {
		t.Errorf("window clamp %d after BoundReceive(%d)", got, n)
	}
	if _, err := io.ReadFull(b, data[4<<20:]); err != nil {
		t.Fatal(err)
	}
	if err := pattern.Verify(5, data, 0); err != nil {
		t.Fatal(err)
	}
	if k, err := b.Read(data[:1]); k != 0 || err != io.EOF {
		t.Fatalf("read past the end: %d, %v", k, err)
	}
	if got := clamp(t, b); got != before {
		t.Errorf("window clamp %d after the body's end, want the %d it had", got, before)
	}
}
