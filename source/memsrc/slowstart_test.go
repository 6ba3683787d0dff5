package memsrc

import (
	"bytes"
	"context"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
)

// A body on a fresh connection sends its window per round trip, doubling it; the next
// body on the same connection starts from the window reached; a connection idle past
// IdleReset, or one whose body was closed early, starts again from InitialWindow.
func TestSlowStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			rtt  = 100 * time.Millisecond
			iw   = 64 << 10
			size = 2 << 20
		)
		m := New()
		m.AddPattern("p", 1, 4*size)
		s := WithSlowStart(m, SlowStart{RTT: rtt, InitialWindow: iw, MaxWindow: 1 << 20, IdleReset: 3 * rtt})
		v, _ := m.Version("p")
		want := make([]byte, 4*size)
		pattern.Fill(1, want, 0)
		read := func(off, n int64, all bool) time.Duration {
			t.Helper()
			start := time.Now()
			b, err := s.OpenRange(context.Background(), "p", source.Range{Off: off, Len: n}, v)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, n)
			if !all {
				got = got[:n/2]
			}
			if _, err := io.ReadFull(b, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want[off:off+int64(len(got))]) {
				t.Fatalf("wrong bytes at %d", off)
			}
			b.Close()
			return time.Since(start)
		}
		// 64+128+256+512 KiB in four rounds, 1 MiB (the cap) in the fifth and the last
		// 64 KiB in the sixth, five round trips in.
		if d := read(0, size, true); d != 5*rtt {
			t.Errorf("cold body took %v, want %v", d, 5*rtt)
		}
		// Warm: 1 MiB per round, so two rounds; the second starts a round trip in.
		if d := read(size, size, true); d != rtt {
			t.Errorf("warm body took %v, want %v", d, rtt)
		}
		time.Sleep(4 * rtt)
		// Half of it, 1 MiB: 960 KiB in four rounds, the rest in the fifth.
		if d := read(2*size, size, false); d != 4*rtt {
			t.Errorf("body after idling took %v, want %v (cold again)", d, 4*rtt)
		}
		if d := read(3*size, size, true); d != 5*rtt {
			t.Errorf("body after an early close took %v, want %v (a new connection)", d, 5*rtt)
		}
		if opens, cold := s.Opens(); opens != 4 || cold != 3 {
			t.Errorf("Opens = %d, %d cold; want 4, 3 cold", opens, cold)
		}
	})
}
