package integration

import (
	"fmt"
	"io"
	"math/rand"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/splice"
	"golang.org/x/sys/unix"

	"github.com/playhead/playhead/origin"
)

// Soak: 32 readers (sequential, random and seeking) on four large files through a real
// mount for a bounded time (10 s; PLAYHEAD_LONG=1: 3 minutes), with the Go heap capped
// and a cache smaller than the files so blocks are evicted and fetched again all along.
// No read may fail, no byte may be wrong, no read may take anywhere near the IO timeout;
// after the unmount the process must be back to its goroutines and open files, and its
// peak RSS must stay under soakRSSCap.
func TestSoak(t *testing.T) {
	const (
		nfiles  = 4
		size    = 128 << 20
		readers = 32
		// memLimit is the Go runtime's soft memory limit for the test: the collector
		// works harder near it, so a leak shows as RSS far beyond it.
		memLimit = 256 << 20
		// soakRSSCap is the most the whole test process (origin, readers and playhead)
		// may reach; -race roughly doubles what playhead alone needs.
		soakRSSCap = 1 << 30
		// slowCap: a read may take longer than the IO timeout (5 s here) only while the
		// origin keeps making progress; twice that is a hang. The slowest reads seen
		// take 1 to 2 s under -race and up to 3 s in the 3-minute run, on two busy cores.
		slowCap = 10 * time.Second
	)
	duration := 10 * time.Second
	if long() {
		duration = 3 * time.Minute
	}
	files := map[string]origin.File{}
	for i := range nfiles {
		files[fmt.Sprintf("big%d.bin", i)] = origin.File{Seed: uint64(500 + i), Size: size}
	}
	files["small.bin"] = origin.File{Seed: 1, Size: 1 << 20} // for the warm-up mount
	_, url := startOrigin(t, files)

	// go-fuse keeps process-wide state a first mount creates (a /dev/null descriptor and
	// a pool of splice pipes): mount once before counting, and empty the pool before
	// each count.
	warm := mountHTTP(t, url, testOptions(t))
	if data, err := os.ReadFile(warm.Path("small.bin")); err != nil || len(data) != 1<<20 {
		t.Fatalf("warm-up read: %d bytes, %v", len(data), err)
	}
	warm.Unmount()
	splice.ClearSplicePool()
	runtime.GC()
	baseG, baseFD := runtime.NumGoroutine(), openFDs()
	old := debug.SetMemoryLimit(memLimit)
	defer debug.SetMemoryLimit(old)
	resetPeakRSS()

	opts := testOptions(t)
	opts.Cache.MaxBytes = 256 << 20 // half the files
	m := mountHTTP(t, url, opts)

	var (
		reads, bytes, errs, bad atomic.Int64
		slowest                 atomic.Int64 // ns
	)
	deadline := time.Now().Add(duration)
	timed := func(f *os.File, p []byte, off int64, seed uint64) {
		start := time.Now()
		n, err := f.ReadAt(p, off)
		took := time.Since(start)
		for {
			s := slowest.Load()
			if int64(took) <= s || slowest.CompareAndSwap(s, int64(took)) {
				break
			}
		}
		reads.Add(1)
		bytes.Add(int64(n))
		bad.Add(badBytes(seed, p[:n], off))
		if want := min(int64(len(p)), size-off); int64(n) != want || (err != nil && err != io.EOF) {
			if errs.Add(1) <= 5 {
				t.Errorf("%s: ReadAt(%d at %d) = %d, %v", f.Name(), len(p), off, n, err)
			}
		}
	}
	var wg sync.WaitGroup
	kinds := []string{"sequential", "random", "seeking"}
	for r := range readers {
		wg.Go(func() {
			i := r % nfiles
			f, err := os.Open(m.Path(fmt.Sprintf("big%d.bin", i)))
			if err != nil {
				t.Error(err)
				errs.Add(1)
				return
			}
			defer f.Close()
			seed := uint64(500 + i)
			rng := rand.New(rand.NewSource(int64(r)))
			p := make([]byte, 1<<20)
			switch kinds[r%3] {
			case "sequential": // a copy or a fast player, from a random start
				off := rng.Int63n(size) &^ (64<<10 - 1)
				for time.Now().Before(deadline) {
					if off >= size {
						off = 0
						unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) // reach playhead again
					}
					timed(f, p[:256<<10], off, seed)
					off += 256 << 10
				}
			case "random": // a database or a scanner: small reads anywhere
				for time.Now().Before(deadline) {
					n := 1 + rng.Intn(128<<10)
					off := rng.Int63n(size - int64(n))
					unix.Fadvise(int(f.Fd()), off, int64(n), unix.FADV_DONTNEED)
					timed(f, p[:n], off, seed)
				}
			case "seeking": // a player whose user jumps around: a few MiB, then a seek
				for time.Now().Before(deadline) {
					off := rng.Int63n(size)
					unix.Fadvise(int(f.Fd()), off, 8<<20, unix.FADV_DONTNEED)
					for k := 0; k < 1+rng.Intn(16) && off < size && time.Now().Before(deadline); k++ {
						timed(f, p[:256<<10], off, seed)
						off += 256 << 10
					}
				}
			}
		})
	}
	wg.Wait()
	peak := peakRSS()
	fst, cst := m.FS.FetchStats(), m.FS.CacheStats()
	m.Unmount()
	splice.ClearSplicePool()
	runtime.GC()
	g, fd := settleTo(baseG, baseFD, 10*time.Second)
	slow := time.Duration(slowest.Load())
	figure(t, "%d readers (sequential, random, seeking) on %d files of %d MiB for %v, cache limit %d MiB, Go memory limit %d MiB: "+
		"%d reads, %.2f GiB, %d errors, %d bad bytes, slowest read %v; %.0f MiB from the origin in %d requests, %d evictions; "+
		"peak RSS %d MiB (cap %d MiB); after unmount goroutines %d -> %d, open files %d -> %d",
		readers, nfiles, size>>20, duration, opts.Cache.MaxBytes>>20, memLimit>>20,
		reads.Load(), float64(bytes.Load())/(1<<30), errs.Load(), bad.Load(), slow.Round(time.Millisecond),
		mib(fst.BytesFetched), fst.Requests, cst.Evictions, peak>>20, soakRSSCap>>20, baseG, g, baseFD, fd)
	if bad.Load() != 0 {
		t.Errorf("%d bad bytes", bad.Load())
	}
	if slow > slowCap {
		t.Errorf("slowest read took %v, want under %v", slow, slowCap)
	}
	if peak > soakRSSCap {
		t.Errorf("peak RSS %d MiB over the cap of %d MiB", peak>>20, soakRSSCap>>20)
	}
	if g > baseG || fd > baseFD {
		t.Errorf("after unmount: goroutines %d -> %d, open files %d -> %d\n%s\n%s", baseG, g, baseFD, fd, fdList(), goroutineDump())
	}
}
