package memsrc

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
)

func TestLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := New()
		m.AddPattern("p", 1, 1000)
		s := WithLatency(m, 200*time.Millisecond)

		start := time.Now()
		if _, err := s.Stat(ctx, "p"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.List(ctx, ""); err != nil {
			t.Fatal(err)
		}
		b, err := s.OpenRange(ctx, "p", source.Range{Off: 0, Len: -1}, source.AnyVersion)
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 600*time.Millisecond {
			t.Fatalf("three calls took %v, want 600ms", got)
		}
		start = time.Now()
		if data, err := io.ReadAll(b); err != nil || len(data) != 1000 {
			t.Fatalf("read %d, %v", len(data), err)
		}
		if got := time.Since(start); got != 0 {
			t.Fatalf("body took %v, want no delay", got)
		}

		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		start = time.Now()
		if _, err := s.OpenRange(cctx, "p", source.Range{}, source.AnyVersion); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("cancelled open: %v", err)
		}
		if got := time.Since(start); got != 50*time.Millisecond {
			t.Fatalf("cancelled open returned after %v", got)
		}
		if st := m.Stats(); st.Opens != 1 {
			t.Fatalf("cancelled open reached the source: %+v", st)
		}
	})
}

func TestLatencyRealTime(t *testing.T) {
	m := New()
	m.Add("f", []byte("x"))
	s := WithLatency(m, 20*time.Millisecond)
	start := time.Now()
	for range 5 {
		if _, err := s.Stat(context.Background(), "f"); err != nil {
			t.Fatal(err)
		}
	}
	if got := time.Since(start); got < 100*time.Millisecond || got > 150*time.Millisecond {
		t.Fatalf("5 stats at 20ms took %v", got)
	}
}

// drain reads b to the end in 64 KiB reads and checks the pattern.
func drain(t *testing.T, b source.Body, seed uint64, off int64) int64 {
	buf := make([]byte, 64<<10)
	var n int64
	for {
		k, err := b.Read(buf)
		if perr := pattern.Verify(seed, buf[:k], off+n); perr != nil {
			t.Error(perr)
			return n
		}
		n += int64(k)
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Errorf("read at %d: %v", n, err)
			return n
		}
	}
}

func TestBandwidth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New()
		m.AddPattern("p", 5, 10<<20)
		s := WithBandwidth(m, 1<<20) // 1 MiB/s
		start := time.Now()
		b, _ := s.OpenRange(context.Background(), "p", source.Range{Off: 0, Len: 512 << 10}, source.AnyVersion)
		if n := drain(t, b, 5, 0); n != 512<<10 {
			t.Fatalf("read %d", n)
		}
		got := time.Since(start)
		if got < 490*time.Millisecond || got > 510*time.Millisecond {
			t.Fatalf("512 KiB at 1 MiB/s took %v", got)
		}
	})
}

func TestBandwidthShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New()
		m.AddPattern("p", 5, 10<<20)
		s := WithBandwidth(m, 1<<20)
		start := time.Now()
		var wg sync.WaitGroup
		ends := make([]time.Duration, 2)
		for i := range 2 {
			wg.Go(func() {
				off := int64(i) << 20
				b, _ := s.OpenRange(context.Background(), "p", source.Range{Off: off, Len: 256 << 10}, source.AnyVersion)
				defer b.Close()
				drain(t, b, 5, off)
				ends[i] = time.Since(start)
			})
		}
		wg.Wait()
		// Together 512 KiB at 1 MiB/s: each body ends near 500ms, not 250ms.
		for i, d := range ends {
			if d < 470*time.Millisecond || d > 510*time.Millisecond {
				t.Errorf("body %d ended after %v, want about 500ms", i, d)
			}
		}
	})
}

func TestBandwidthRealTime(t *testing.T) {
	m := New()
	m.AddPattern("p", 5, 10<<20)
	s := WithBandwidth(m, 4<<20)
	start := time.Now()
	b, _ := s.OpenRange(context.Background(), "p", source.Range{Off: 0, Len: 800 << 10}, source.AnyVersion)
	drain(t, b, 5, 0)
	// 800 KiB at 4 MiB/s is 195ms. Faster would break the limit; slower is allowed more
	// slack, as a loaded machine (-race, parallel packages) wakes timers late.
	if got := time.Since(start); got < 185*time.Millisecond || got > 250*time.Millisecond {
		t.Fatalf("took %v, want 195ms", got)
	}
}

func TestBandwidthCloseUnblocksRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New()
		m.AddPattern("p", 5, 1000)
		s := WithBandwidth(m, 1) // one byte a second
		b, _ := s.OpenRange(context.Background(), "p", source.Range{Off: 0, Len: -1}, source.AnyVersion)
		go func() {
			time.Sleep(10 * time.Millisecond)
			b.Close()
		}()
		start := time.Now()
		_, err := b.Read(make([]byte, 10))
		if !errors.Is(err, ErrClosed) || time.Since(start) != 10*time.Millisecond {
			t.Fatalf("Read returned %v after %v", err, time.Since(start))
		}
	})
}

func openN(t *testing.T, s source.Source, n int) []error {
	t.Helper()
	var errs []error
	for range n {
		b, err := s.OpenRange(context.Background(), "p", source.Range{Off: 0, Len: 100}, source.AnyVersion)
		if err == nil {
			_, err = io.ReadAll(b)
			b.Close()
		}
		errs = append(errs, err)
	}
	return errs
}

func TestFaultsNth(t *testing.T) {
	m := New()
	m.AddPattern("p", 9, 1000)
	s := WithFaults(m, FaultPlan{Faults: []Fault{
		{N: 3, Kind: FailOpen},
		{N: 5, Kind: Changed},
		{N: 6, Kind: CutShort, At: 40},
		{N: 7, Kind: ReadError, At: 0},
	}})
	errs := openN(t, s, 8)
	for i, err := range errs {
		n := i + 1
		var want error
		switch n {
		case 3, 7:
			want = ErrInjected
		case 5:
			want = source.ErrChanged
		case 6:
			want = io.ErrUnexpectedEOF
		}
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("call %d: %v, want %v", n, err, want)
		}
		if err != nil && source.IsPermanent(err) != (n == 5) {
			t.Errorf("call %d: IsPermanent(%v) wrong", n, err)
		}
	}
}

func TestFaultCutKeepsBytes(t *testing.T) {
	m := New()
	m.AddPattern("p", 9, 1000)
	s := WithFaults(m, FaultPlan{Faults: []Fault{{N: 1, Kind: CutShort, At: 40}}})
	b, _ := s.OpenRange(context.Background(), "p", source.Range{Off: 100, Len: 100}, source.AnyVersion)
	data, err := io.ReadAll(b)
	if len(data) != 40 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %d bytes, %v", len(data), err)
	}
	if err := pattern.Verify(9, data, 100); err != nil {
		t.Fatal(err)
	}
	var pe *source.PathError
	if !errors.As(err, &pe) || pe.Off != 140 || pe.Path != "p" {
		t.Fatalf("error %v does not carry path and offset 140", err)
	}
}

func TestFaultHang(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New()
		m.AddPattern("p", 9, 1000)
		s := WithFaults(m, FaultPlan{Faults: []Fault{{N: 1, Kind: Hang, At: 10}, {N: 2, Kind: Hang}}})

		b, _ := s.OpenRange(context.Background(), "p", source.Range{Off: 0, Len: -1}, source.AnyVersion)
		if n, err := io.ReadFull(b, make([]byte, 10)); n != 10 || err != nil {
			t.Fatalf("before hang: %d, %v", n, err)
		}
		time.AfterFunc(time.Second, func() { b.Close() })
		start := time.Now()
		if _, err := b.Read(make([]byte, 10)); !errors.Is(err, ErrClosed) || time.Since(start) != time.Second {
			t.Fatalf("hang ended with %v after %v", err, time.Since(start))
		}

		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		b, _ = s.OpenRange(ctx, "p", source.Range{Off: 0, Len: -1}, source.AnyVersion)
		if _, err := b.Read(make([]byte, 10)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("hang ended with %v", err)
		}
	})
}

func TestFaultRateReplays(t *testing.T) {
	m := New()
	m.AddPattern("p", 9, 1000)
	plan := FaultPlan{FailRate: 0.2, CutRate: 0.1, Seed: 42}
	a := openN(t, WithFaults(m, plan), 500)
	b := openN(t, WithFaults(m, plan), 500)
	var fails, cuts int
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || a[i] != nil && a[i].Error() != b[i].Error() {
			t.Fatalf("call %d: %v then %v", i+1, a[i], b[i])
		}
		switch {
		case errors.Is(a[i], ErrInjected):
			fails++
		case errors.Is(a[i], io.ErrUnexpectedEOF):
			cuts++
		}
	}
	// 500 calls: 100 fails expected, and 10% of the remaining 400 cut (40).
	if fails < 70 || fails > 130 || cuts < 20 || cuts > 60 {
		t.Fatalf("fails=%d cuts=%d", fails, cuts)
	}
	c := openN(t, WithFaults(m, FaultPlan{FailRate: 0.2, Seed: 43}), 500)
	same := 0
	for i := range a {
		if errors.Is(a[i], ErrInjected) == errors.Is(c[i], ErrInjected) {
			same++
		}
	}
	if same == 500 {
		t.Fatal("another seed failed the same calls")
	}
}
