package play

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Test timeline: 1 MB/s and 100 kB chunks make a chunk play for exactly 100 ms.
const (
	testRate  = 1_000_000
	testChunk = 100_000
	chunkTime = 100 * time.Millisecond
	fastRead  = time.Millisecond
)

// scriptedFile is an io.ReaderAt of size bytes whose reads take a scripted time: slow[i]
// for the i-th read, fastRead otherwise. It sleeps on the real clock (virtual inside a
// synctest bubble) or advances a virtualClock if one is set. It records every read.
type scriptedFile struct {
	size  int64
	slow  map[int]time.Duration
	clock *virtualClock // nil: time.Sleep
	fail  int           // read number that fails, -1 for none

	mu    sync.Mutex
	reads []readCall
}

type readCall struct {
	off, n int64
	at     time.Time
}

func newScripted(size int64, slow map[int]time.Duration) *scriptedFile {
	return &scriptedFile{size: size, slow: slow, fail: -1}
}

var errInjected = errors.New("injected read error")

func (f *scriptedFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	i := len(f.reads)
	now := time.Now()
	if f.clock != nil {
		now = f.clock.Now()
	}
	f.reads = append(f.reads, readCall{off: off, n: int64(len(p)), at: now})
	f.mu.Unlock()

	lat := fastRead
	if d, ok := f.slow[i]; ok {
		lat = d
	}
	if f.clock != nil {
		f.clock.advance(lat)
	} else {
		time.Sleep(lat)
	}
	if i == f.fail {
		return 0, errInjected
	}
	if off >= f.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), f.size-off)
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// virtualClock is a Clock for tests that do not use synctest: Sleep and reads advance it.
type virtualClock struct{ now time.Time }

func (c *virtualClock) Now() time.Time          { return c.now }
func (c *virtualClock) advance(d time.Duration) { c.now = c.now.Add(d) }
func (c *virtualClock) Sleep(ctx context.Context, d time.Duration) error {
	if d > 0 {
		c.advance(d)
	}
	return ctx.Err()
}

func testOptions() Options {
	return Options{Rate: testRate, Chunk: testChunk}
}

// play runs Run over f inside a synctest bubble, where the real clock is virtual.
func play(t *testing.T, f *scriptedFile, opts Options) Result {
	t.Helper()
	var res Result
	synctest.Test(t, func(t *testing.T) {
		var err error
		res, err = Run(t.Context(), f, f.size, opts)
		if err != nil {
			t.Fatal(err)
		}
	})
	return res
}

func TestFastReadsNeverFreeze(t *testing.T) {
	f := newScripted(20*testChunk, nil)
	res := play(t, f, testOptions())
	if res.Freezes != 0 || res.FrozenTotal != 0 || res.WorstStall != 0 {
		t.Errorf("fast reads froze: %+v", res)
	}
	if res.Startup != fastRead {
		t.Errorf("startup %v, want %v", res.Startup, fastRead)
	}
	if res.Bytes != 20*testChunk || len(res.Samples) != 20 {
		t.Errorf("played %d bytes in %d reads, want %d in 20", res.Bytes, len(res.Samples), 20*testChunk)
	}
	// Read i is issued when chunk i-1 is due: startup + (i-1) chunk times. The first two
	// go back to back, since chunk 0 is due the moment it arrives.
	began := f.reads[0].at
	for i, r := range f.reads {
		want := began
		if i > 0 {
			want = began.Add(fastRead + time.Duration(i-1)*chunkTime)
		}
		if !r.at.Equal(want) {
			t.Errorf("read %d issued at +%v, want +%v", i, r.at.Sub(began), want.Sub(began))
		}
		if r.off != int64(i)*testChunk {
			t.Errorf("read %d at offset %d, want %d", i, r.off, int64(i)*testChunk)
		}
	}
	// Each later read completes fastRead after chunk i-1 was due: 99 ms of slack.
	for i, s := range res.Samples[1:] {
		if s.Late != fastRead-chunkTime {
			t.Errorf("read %d late by %v, want %v", i+1, s.Late, fastRead-chunkTime)
		}
	}
	if want := fastRead + 18*chunkTime + fastRead; res.Elapsed != want {
		t.Errorf("elapsed %v, want %v", res.Elapsed, want)
	}
	if res.ReadP50 != fastRead || res.ReadP99 != fastRead {
		t.Errorf("p50 %v p99 %v, want %v", res.ReadP50, res.ReadP99, fastRead)
	}
}

func TestOneSlowReadIsOneFreeze(t *testing.T) {
	const slow = 450 * time.Millisecond
	f := newScripted(20*testChunk, map[int]time.Duration{5: slow})
	res := play(t, f, testOptions())
	// Read 5 is issued when chunk 4 is due and needed 100 ms later: it is 350 ms late.
	wantStall := slow - chunkTime
	if res.Freezes != 1 || res.WorstStall != wantStall || res.FrozenTotal != wantStall {
		t.Fatalf("freezes %d, worst %v, total %v; want 1, %v, %v", res.Freezes, res.WorstStall, res.FrozenTotal, wantStall, wantStall)
	}
	if !res.Samples[5].Freeze || res.Samples[5].Late != wantStall {
		t.Errorf("sample 5 = %+v, want a freeze %v late", res.Samples[5], wantStall)
	}
	// After the rebuffer the timeline moved by the stall: read 6 is wanted as soon as
	// chunk 5 arrived (it is due now), the ones after keep their 99 ms of slack.
	if got, want := f.reads[6].at.Sub(f.reads[5].at), slow; got != want {
		t.Errorf("read 6 issued %v after read 5, want %v", got, want)
	}
	for i, s := range res.Samples[6:] {
		if s.Freeze || s.Late != fastRead-chunkTime {
			t.Errorf("read %d after the rebuffer: %+v, want %v late, no freeze", i+6, s, fastRead-chunkTime)
		}
	}
	if want := fastRead + 18*chunkTime + fastRead + wantStall; res.Elapsed != want {
		t.Errorf("elapsed %v, want %v (the stall adds to the play time)", res.Elapsed, want)
	}
	if res.ReadP99 != slow || res.ReadP50 != fastRead {
		t.Errorf("p50 %v p99 %v, want %v and %v", res.ReadP50, res.ReadP99, fastRead, slow)
	}
}

func TestLatenessUnderThresholdIsNotAFreeze(t *testing.T) {
	// 5 ms late: unseen, and the timeline does not move.
	f := newScripted(10*testChunk, map[int]time.Duration{3: chunkTime + 5*time.Millisecond})
	res := play(t, f, testOptions())
	if res.Freezes != 0 {
		t.Errorf("%d freezes for a read 5 ms late (threshold 10 ms)", res.Freezes)
	}
	if got := res.Samples[3].Late; got != 5*time.Millisecond {
		t.Errorf("read 3 late %v, want 5ms", got)
	}
	// Read 4 was wanted when chunk 3 was due, which had passed: it goes at once, and
	// completes against the unshifted timeline.
	if got := res.Samples[4].Late; got != 5*time.Millisecond+fastRead-chunkTime {
		t.Errorf("read 4 late %v, want %v", got, 5*time.Millisecond+fastRead-chunkTime)
	}
}

func TestSlowSourceAccumulatesToFreezes(t *testing.T) {
	// Every read takes 104 ms of a 100 ms chunk: 4 ms more lateness each time, a freeze
	// each time it passes 10 ms, then the rebuffer resets it.
	slow := map[int]time.Duration{}
	for i := 1; i < 12; i++ {
		slow[i] = chunkTime + 4*time.Millisecond
	}
	res := play(t, newScripted(12*testChunk, slow), testOptions())
	// Late: 4, 8, 12 (freeze, shift), 4, 8, 12 (freeze), ...: reads 3, 6, 9.
	if res.Freezes != 3 || res.WorstStall != 12*time.Millisecond {
		t.Errorf("freezes %d worst %v, want 3 of 12ms", res.Freezes, res.WorstStall)
	}
}

func TestStartupIsTheFirstRead(t *testing.T) {
	f := newScripted(5*testChunk, map[int]time.Duration{0: 700 * time.Millisecond})
	res := play(t, f, testOptions())
	if res.Startup != 700*time.Millisecond || res.Freezes != 0 {
		t.Errorf("startup %v freezes %d, want 700ms and none (the clock starts after it)", res.Startup, res.Freezes)
	}
}

func TestAheadHidesASlowRead(t *testing.T) {
	slow := map[int]time.Duration{6: 250 * time.Millisecond}
	if res := play(t, newScripted(12*testChunk, slow), testOptions()); res.Freezes != 1 {
		t.Errorf("Ahead 1: %d freezes, want 1", res.Freezes)
	}
	opts := testOptions()
	opts.Ahead = 3 // 300 ms of buffer
	f := newScripted(12*testChunk, slow)
	res := play(t, f, opts)
	if res.Freezes != 0 {
		t.Errorf("Ahead 3: %d freezes, want 0", res.Freezes)
	}
	// Reads 1..3 go right after startup; read i waits for chunk i-3.
	if got := f.reads[3].at.Sub(f.reads[0].at); got != 3*fastRead {
		t.Errorf("read 3 issued at +%v, want back to back at +%v", got, 3*fastRead)
	}
	if got := f.reads[4].at.Sub(f.reads[0].at); got != fastRead+chunkTime {
		t.Errorf("read 4 issued at +%v, want when chunk 1 is due, +%v", got, fastRead+chunkTime)
	}
}

func TestStartAndLimit(t *testing.T) {
	f := newScripted(100*testChunk, nil)
	opts := testOptions()
	opts.Start = 1_234_567
	opts.Limit = 250_000
	res := play(t, f, opts)
	if res.Bytes != opts.Limit {
		t.Errorf("played %d bytes, want %d", res.Bytes, opts.Limit)
	}
	want := []readCall{{off: 1_234_567, n: testChunk}, {off: 1_334_567, n: testChunk}, {off: 1_434_567, n: 50_000}}
	if len(f.reads) != len(want) {
		t.Fatalf("reads %+v, want %+v", f.reads, want)
	}
	for i, r := range f.reads {
		if r.off != want[i].off || r.n != want[i].n {
			t.Errorf("read %d = [%d +%d], want [%d +%d]", i, r.off, r.n, want[i].off, want[i].n)
		}
	}

	// A limit past the end stops at the end; a file shorter than its size stops at EOF.
	opts.Limit = 1 << 40
	if res := play(t, newScripted(1_300_000, nil), opts); res.Bytes != 1_300_000-opts.Start {
		t.Errorf("limit past EOF played %d bytes, want %d", res.Bytes, 1_300_000-opts.Start)
	}
	short := newScripted(1_300_000, nil)
	synctest.Test(t, func(t *testing.T) {
		res, err := Run(t.Context(), short, 2_000_000, testOptions())
		if err != nil || res.Bytes != 1_300_000 {
			t.Errorf("short file: %d bytes, %v; want 1300000, nil", res.Bytes, err)
		}
	})
	if _, err := Run(context.Background(), f, f.size, Options{Start: f.size}); err == nil {
		t.Error("start at EOF: no error")
	}
}

func TestInjectedClock(t *testing.T) {
	// The same slow-read script as TestOneSlowReadIsOneFreeze, without synctest.
	clock := &virtualClock{now: time.Unix(1e9, 0)}
	f := newScripted(20*testChunk, map[int]time.Duration{5: 450 * time.Millisecond})
	f.clock = clock
	opts := testOptions()
	opts.Clock = clock
	res, err := Run(context.Background(), f, f.size, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Freezes != 1 || res.WorstStall != 350*time.Millisecond || res.Startup != fastRead {
		t.Errorf("freezes %d worst %v startup %v, want 1, 350ms, 1ms", res.Freezes, res.WorstStall, res.Startup)
	}
}

func TestReadErrorAndCancel(t *testing.T) {
	f := newScripted(20*testChunk, nil)
	f.fail = 4
	synctest.Test(t, func(t *testing.T) {
		res, err := Run(t.Context(), f, f.size, testOptions())
		if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "offset 400000") {
			t.Errorf("err = %v, want the injected error at offset 400000", err)
		}
		if len(res.Samples) != 4 {
			t.Errorf("%d samples before the error, want 4", len(res.Samples))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 550*time.Millisecond)
		defer cancel()
		res, err := Run(ctx, newScripted(20*testChunk, nil), 20*testChunk, testOptions())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want deadline exceeded", err)
		}
		if n := len(res.Samples); n < 5 || n > 7 {
			t.Errorf("%d reads in 550 ms of play, want about 6", n)
		}
	})
	if _, err := Run(context.Background(), f, f.size, Options{Rate: -1}); err == nil {
		t.Error("negative rate accepted")
	}
}

func TestPlayFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "movie")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 1_000_000), 0o644); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		res, err := PlayFile(t.Context(), path, testOptions())
		if err != nil {
			t.Fatal(err)
		}
		if res.Bytes != 1_000_000 || len(res.Samples) != 10 {
			t.Errorf("played %d bytes in %d reads", res.Bytes, len(res.Samples))
		}
		// A local file reads in no virtual time: the last of the 10 reads is issued, and
		// completes, when chunk 8 is due.
		if res.Freezes != 0 || res.Elapsed != 8*chunkTime {
			t.Errorf("freezes %d elapsed %v, want 0 and %v", res.Freezes, res.Elapsed, 8*chunkTime)
		}
	})
	if _, err := PlayFile(context.Background(), path+".missing", testOptions()); err == nil {
		t.Error("missing file: no error")
	}
}

func TestResultJSONAndPrint(t *testing.T) {
	res := play(t, newScripted(20*testChunk, map[int]time.Duration{5: 450 * time.Millisecond}), testOptions())
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	if fields["worst_stall_s"] != 0.35 || fields["startup_s"] != 0.001 || fields["freezes"] != 1.0 {
		t.Errorf("JSON %s: want seconds as floats", b)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.WorstStall != res.WorstStall || back.Elapsed != res.Elapsed || len(back.Samples) != len(res.Samples) || back.Samples[5] != res.Samples[5] {
		t.Errorf("JSON round trip: got %+v, want %+v", back, res)
	}

	var out strings.Builder
	if err := res.Print(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	for _, want := range []string{"startup", "1ms", "freezes", "350ms", "p99 450ms", "1.91 MiB"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Print output lacks %q:\n%s", want, out.String())
		}
	}
}
