package kernlink

import (
	"bytes"
	"io"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

// timedSource gives its packets one per Read, each at its time since the start.
type timedSource struct {
	start time.Time
	at    []time.Duration
	data  [][]byte
}

func (s *timedSource) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	if wait := time.Until(s.start.Add(s.at[0])); wait > 0 {
		time.Sleep(wait)
	}
	n := copy(p, s.data[0])
	s.at, s.data = s.at[1:], s.data[1:]
	return n, nil
}

// arrival is a packet as the sink saw it.
type arrival struct {
	at   time.Duration
	data []byte
}

type recorder struct {
	start time.Time
	got   []arrival
}

func (r *recorder) Write(p []byte) (int, error) {
	r.got = append(r.got, arrival{time.Since(r.start), bytes.Clone(p)})
	return len(p), nil
}

func TestDelayLineHoldsEachPacketTheDelayInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 100 * time.Millisecond
		start := time.Now()
		src := &timedSource{start: start,
			at:   []time.Duration{0, 0, 30 * time.Millisecond, 250 * time.Millisecond},
			data: [][]byte{[]byte("a"), []byte("bb"), []byte("ccc"), []byte("dddd")},
		}
		d := newDelayLine(delay, 1500)
		rec := &recorder{start: start}
		done := make(chan error, 1)
		go func() { done <- d.drain(rec) }()
		if err := d.feed(src); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		want := []arrival{{100 * time.Millisecond, []byte("a")}, {100 * time.Millisecond, []byte("bb")},
			{130 * time.Millisecond, []byte("ccc")}, {350 * time.Millisecond, []byte("dddd")}}
		if len(rec.got) != len(want) {
			t.Fatalf("got %d packets, want %d", len(rec.got), len(want))
		}
		for i, w := range want {
			if g := rec.got[i]; g.at != w.at || !bytes.Equal(g.data, w.data) {
				t.Errorf("packet %d: got %q at %v, want %q at %v", i, g.data, g.at, w.data, w.at)
			}
		}
		if d.packets.Load() != 4 || d.bytes.Load() != 10 {
			t.Errorf("counted %d packets, %d bytes; want 4, 10", d.packets.Load(), d.bytes.Load())
		}
	})
}

func TestDelayLineZeroDelayPassesThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		src := &timedSource{start: start, at: []time.Duration{5 * time.Millisecond}, data: [][]byte{[]byte("x")}}
		d := newDelayLine(0, 1500)
		rec := &recorder{start: start}
		go d.feed(src)
		d.drain(rec)
		if len(rec.got) != 1 || rec.got[0].at != 5*time.Millisecond {
			t.Fatalf("got %+v, want x at 5ms", rec.got)
		}
	})
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrShortWrite }

func TestDelayLineCountsFailedWritesAsDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &timedSource{start: time.Now(), at: []time.Duration{0, 0}, data: [][]byte{[]byte("a"), []byte("b")}}
		d := newDelayLine(time.Millisecond, 1500)
		go d.feed(src)
		d.drain(failingWriter{})
		if d.dropped.Load() != 2 || d.packets.Load() != 0 {
			t.Fatalf("dropped %d, written %d; want 2, 0", d.dropped.Load(), d.packets.Load())
		}
	})
}

// closedWriter is a device that was closed.
type closedWriter struct{ writes int }

func (w *closedWriter) Write([]byte) (int, error) { w.writes++; return 0, os.ErrClosed }

func TestDelayLineDrainsAFullLineAfterItsDeviceCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := queuePackets + 10 // more than the line holds: feed blocks until drain takes some
		src := &timedSource{start: time.Now()}
		for range n {
			src.at = append(src.at, 0)
			src.data = append(src.data, []byte("p"))
		}
		d := newDelayLine(time.Second, 1500)
		fed := make(chan error, 1)
		go func() { fed <- d.feed(src) }()
		w := &closedWriter{}
		d.drain(w)
		if err := <-fed; err != nil {
			t.Fatal(err)
		}
		if w.writes != 1 {
			t.Errorf("%d writes to a closed device, want 1", w.writes)
		}
	})
}
