package integration

import (
	"context"
	"errors"
	"math/rand"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/linkemu"
	"github.com/playhead/playhead/origin"
	"github.com/playhead/playhead/source/httpsrc"
	"github.com/playhead/playhead/vfs"
)

// Connection faults between playhead and its origin, injected by the link emulator
// (reset_peer, timeout, limit_data, slicer, slow_close), through the library (no FUSE:
// the FUSE edge only turns the error into EIO, which TestUnreachableOrigin covers).
// A transient fault hits the next two connections: every read must succeed, every byte
// must be right. A permanent fault hits every connection from its first byte: every
// read must fail within the IO timeout (plus slack), never hang; once the fault is
// lifted the same open file must read right again. Either way, after the FS is closed
// no goroutine, open file or connection to the origin may be left.
func TestConnectionFaults(t *testing.T) {
	const (
		size       = 4 << 20
		seed       = 21
		piece      = 256 << 10
		midBody    = 100 << 10 // a transient fault strikes this far into a connection
		ioTimeout  = time.Second
		failMemory = 2100 * time.Millisecond
		// slack covers -race on a loaded 2-core machine and one retry backoff step.
		slack = 1500 * time.Millisecond
	)
	_, originURL := startOrigin(t, map[string]origin.File{"a.bin": {Seed: seed, Size: size}})
	link, linkURL := behindLink(t, originURL, linkemu.Options{})

	transient := func(f linkemu.Fault) linkemu.Fault { f.After, f.Conns = midBody, 2; return f }
	cases := []struct {
		name  string
		fault linkemu.Fault
		fails bool // every read must fail (else every read must succeed)
	}{
		{"reset_peer/transient", transient(linkemu.Fault{Kind: linkemu.FaultResetPeer}), false},
		{"reset_peer/permanent", linkemu.Fault{Kind: linkemu.FaultResetPeer}, true},
		{"timeout/transient", transient(linkemu.Fault{Kind: linkemu.FaultTimeout}), false},
		{"timeout/permanent", linkemu.Fault{Kind: linkemu.FaultTimeout}, true},
		{"limit_data/transient", transient(linkemu.Fault{Kind: linkemu.FaultLimitData}), false},
		{"limit_data/permanent", linkemu.Fault{Kind: linkemu.FaultLimitData}, true},
		{"slow_close/transient", transient(linkemu.Fault{Kind: linkemu.FaultSlowClose, CloseDelay: 300 * time.Millisecond}), false},
		{"slow_close/permanent", linkemu.Fault{Kind: linkemu.FaultSlowClose, CloseDelay: 10 * time.Second}, true},
		// Tiny writes never stop: every connection, every read must succeed.
		{"slicer/permanent", linkemu.Fault{Kind: linkemu.FaultSlicer, SliceBytes: 1500}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runtime.GC()
			baseG, baseFD := settleTo(0, 0, 0) // just count
			baseOpen := link.Stats().Open
			faultedBefore := link.Faulted()

			hopts := httpsrc.DefaultOptions()
			hopts.Timeout = ioTimeout // background HEADs (spare connections) give up as soon
			src, err := httpsrc.New(linkURL, hopts)
			if err != nil {
				t.Fatal(err)
			}
			opts := testOptions(t)
			opts.Fetch.IOTimeout = ioTimeout
			opts.Fetch.StallTimeout = 300 * time.Millisecond // a stalled body is reopened quickly
			opts.Fetch.RetryMax = 200 * time.Millisecond
			fsys, err := vfs.New(src, opts)
			if err != nil {
				t.Fatal(err)
			}
			f, err := fsys.Open(context.Background(), "a.bin") // the listing passes unharmed
			if err != nil {
				t.Fatal(err)
			}
			link.SetFault(c.fault)
			src.CloseIdleConnections() // every range from now on dials a faulted connection

			var reads, failed int
			var bad int64
			var slowest time.Duration
			var firstErr error
			readAt := func(off int64) error {
				p := make([]byte, piece)
				start := time.Now()
				n, err := f.ReadAt(p, off)
				slowest = max(slowest, time.Since(start))
				reads++
				bad += badBytes(seed, p[:n], off)
				if err != nil {
					failed++
					if firstErr == nil {
						firstErr = err
					}
				}
				return err
			}
			if c.fails {
				failing := []int64{size / 2}
				if long() {
					failing = []int64{0, size / 2, size - piece}
				}
				for _, off := range failing {
					if err := readAt(off); err == nil {
						t.Errorf("read at %d succeeded through a link that breaks every connection", off)
					}
				}
				link.SetFault(linkemu.Fault{})
				// A failed block fails new reads at once for a while (fetch's failMemory,
				// 2 s), so the kernel's immediate re-read does not wait out the timeout
				// again; the origin is asked again after that.
				time.Sleep(failMemory)
			}
			rng := rand.New(rand.NewSource(int64(len(c.name))))
			offs := []int64{}
			for off := int64(0); off < size; off += piece {
				offs = append(offs, off)
			}
			for i := 0; i < 8; i++ {
				offs = append(offs, rng.Int63n(size-piece))
			}
			okBefore := failed
			for _, off := range offs {
				if err := readAt(off); err != nil {
					t.Errorf("read at %d: %v", off, err)
				}
			}
			link.SetFault(linkemu.Fault{})
			fst := fsys.FetchStats()
			f.Close()
			fsys.Close()

			g, fd := settleTo(baseG, baseFD, 10*time.Second)
			var open int64
			for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(20 * time.Millisecond) {
				if open = link.Stats().Open; open <= baseOpen {
					break
				}
			}
			figure(t, "%d reads of %d KiB, %d failed (expected: %s), slowest %v (bound %v), %d bad bytes, "+
				"%d faulted connections, %d retries; goroutines %d -> %d, open files %d -> %d, origin connections %d -> %d",
				reads, piece>>10, failed, map[bool]string{true: "the first ones", false: "none"}[c.fails],
				slowest.Round(time.Millisecond), ioTimeout+slack, bad, link.Faulted()-faultedBefore, fst.Retries,
				baseG, g, baseFD, fd, baseOpen, open)
			if firstErr != nil {
				t.Logf("first error: %v", firstErr)
			}
			if bad != 0 {
				t.Errorf("%d bad bytes", bad)
			}
			if slowest > ioTimeout+slack {
				t.Errorf("slowest read took %v, bound %v", slowest, ioTimeout+slack)
			}
			if failed != okBefore {
				t.Errorf("%d reads failed after the fault was lifted", failed-okBefore)
			}
			if link.Faulted() == faultedBefore {
				t.Errorf("no connection was faulted: the case tested nothing")
			}
			if g > baseG || fd > baseFD {
				t.Errorf("leak after Close: goroutines %d -> %d, open files %d -> %d\n%s", baseG, g, baseFD, fd, goroutineDump())
			}
			if open > baseOpen {
				t.Errorf("%d connections to the origin still open after Close (%d before)", open, baseOpen)
			}
		})
	}
}

// The same through a real mount, for the worst fault: an origin that stops sending
// mid-connection and never closes. A read through FUSE must fail with EIO within the IO
// timeout, never hang the reader.
func TestConnectionStallThroughMountIsEIO(t *testing.T) {
	const (
		size      = 8 << 20
		seed      = 22
		ioTimeout = time.Second
		slack     = 1500 * time.Millisecond
	)
	_, originURL := startOrigin(t, map[string]origin.File{"a.bin": {Seed: seed, Size: size}})
	link, linkURL := behindLink(t, originURL, linkemu.Options{})
	hopts := httpsrc.DefaultOptions()
	hopts.Timeout = ioTimeout
	src, err := httpsrc.New(linkURL, hopts)
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions(t)
	opts.Fetch.IOTimeout = ioTimeout
	m := mountSource(t, src, opts)
	f, err := os.Open(m.Path("a.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	link.SetFault(linkemu.Fault{Kind: linkemu.FaultTimeout, After: 1 << 10})
	src.CloseIdleConnections()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := f.ReadAt(make([]byte, 64<<10), size/2)
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(ioTimeout + slack):
		t.Fatalf("read through a stalled connection still blocked after %v (IO timeout %v)", ioTimeout+slack, ioTimeout)
	}
	took := time.Since(start)
	figure(t, "read through a connection that stalls after 1 KiB: %v after %v (IO timeout %v)", err, took.Round(time.Millisecond), ioTimeout)
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("read through a stalled connection: %v, want EIO", err)
	}
	link.SetFault(linkemu.Fault{})
}
