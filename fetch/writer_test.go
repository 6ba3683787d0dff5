package fetch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// sumMemStore is a memStore that takes checksums from the caller, as *cache.Cache does,
// and checks each against the data.
type sumMemStore struct {
	*memStore
	sums, bad, direct atomic.Int64
	delay             time.Duration // each Put takes this long, as a slow disk would
}

func (m *sumMemStore) PutSumDirect(key cache.FileKey, block int64, data []byte, sum uint32) error {
	m.direct.Add(1)
	return m.PutSum(key, block, data, sum)
}

func (m *sumMemStore) PutSum(key cache.FileKey, block int64, data []byte, sum uint32) error {
	time.Sleep(m.delay)
	m.sums.Add(1)
	if sum != cache.Checksum(0, data) {
		m.bad.Add(1)
		return fmt.Errorf("block %d: checksum %08x does not match its data", block, sum)
	}
	return m.Put(key, block, data)
}

// Streams compute each block's checksum as its bytes arrive (in pieces, as the body
// returns them) and hand it to a store that takes it.
func TestStreamsChecksumBlocksForTheStore(t *testing.T) {
	mem := memsrc.New()
	size := int64(20*testBlock + 99)
	mem.AddPattern("a.bin", testSeed, size)
	store := &sumMemStore{memStore: newMemStore()}
	// Small, uneven body reads, so a block's checksum is built from many pieces.
	var src source.Source = memsrc.WithBandwidth(mem, 64<<20)
	f := New(src, store, testOptions(), nil)
	v, _ := mem.Version("a.bin")
	file := f.Open("a.bin", v)
	defer file.Release()
	fx := &fixture{mem: mem, store: store.memStore, f: f, file: file}
	if err := fx.read(t, 0, size, ahead(1, 0, size)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for store.sums.Load() < 21 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n, bad := store.sums.Load(), store.bad.Load(); n != 21 || bad != 0 {
		t.Fatalf("%d blocks stored with a checksum (%d wrong), want 21 right ones", n, bad)
	}
}

// Blocks from a stream that delivers faster than DirectWriteRate are written direct while
// the disk is behind (the write queue backs up); at the default rate, those from a link
// as fast as the far one are not, since a direct write's wait for the file system would
// show as a frozen player there. The first directMinBytes never count. (The fast cases
// set a low rate: under the race detector a memory source delivers only about 50 MB/s.)
func TestFastStreamsWriteDirect(t *testing.T) {
	const size = 16 << 20
	for _, tc := range []struct {
		name  string
		bw    int64         // bytes per second; 0: a memory copy
		rate  float64       // DirectWriteRate; 0: the default
		delay time.Duration // per cache write
		fast  bool
	}{
		{"memory, slow disk", 0, 5e6, 2 * time.Millisecond, true},
		// Above the rate, but slow enough that only a writer stalled for 400 ms (not a
		// loaded test machine's scheduling) would let the queue reach the backlog.
		{"10MB/s, disk keeps up", 10_000_000, 5e6, 0, false},
		{"40MB/s", 40_000_000, 0, 2 * time.Millisecond, false},
		{"never", 0, -1, 2 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memsrc.New()
			mem.AddPattern("a.bin", testSeed, size)
			store := &sumMemStore{memStore: newMemStore(), delay: tc.delay}
			var src source.Source = mem
			if tc.bw > 0 {
				src = memsrc.WithBandwidth(mem, tc.bw)
			}
			o := testOptions()
			o.DirectWriteRate = tc.rate
			f := New(src, store, o, nil)
			v, _ := mem.Version("a.bin")
			file := f.Open("a.bin", v)
			defer file.Release()
			fx := &fixture{mem: mem, store: store.memStore, f: f, file: file}
			// Read-ahead to the end, so most blocks have no reader waiting when they
			// arrive and must land in the cache: the stream waits for room in the queue.
			for off := int64(0); off < size; off += 1 << 20 {
				if err := fx.read(t, off, 1<<20, ahead(1, off, size)); err != nil {
					t.Fatal(err)
				}
			}
			const blocks = size / testBlock
			f.Close() // waits for the writers
			n, direct, skipped := store.sums.Load(), store.direct.Load(), f.Stats().CacheSkipped
			if n+skipped != blocks || store.bad.Load() != 0 {
				t.Fatalf("%d blocks stored (%d with a wrong checksum) and %d skipped, want %d in all", n, store.bad.Load(), skipped, blocks)
			}
			if maxDirect := int64(blocks - directMinBytes/testBlock); direct > maxDirect {
				t.Fatalf("%d blocks written direct, want at most %d: the first %d bytes are before the rate counts", direct, maxDirect, directMinBytes)
			}
			if tc.fast && direct == 0 {
				t.Fatal("no block of a memory-speed stream was written direct")
			}
			if !tc.fast && direct != 0 {
				t.Fatalf("%d blocks written direct, want none", direct)
			}
		})
	}
}

// slowPut is a memStore whose writes take delay each, and whose write of block stuck
// (if not negative) waits for gate, once it has told entered (if not nil): a cache disk
// behind the origin.
type slowPut struct {
	*memStore
	delay   time.Duration
	stuck   int64 // the block whose write waits for gate; allStuck: every block's
	gate    chan struct{}
	entered chan struct{}
}

const allStuck = -2

// patternFile is an origin holding a.bin, size bytes of the test pattern, and its version.
func patternFile(t *testing.T, size int64) (*memsrc.Source, source.Version) {
	t.Helper()
	mem := memsrc.New()
	mem.AddPattern("a.bin", testSeed, size)
	v, err := mem.Stat(context.Background(), "a.bin")
	if err != nil {
		t.Fatal(err)
	}
	return mem, v.Version
}

func (s slowPut) Put(key cache.FileKey, block int64, data []byte) error {
	time.Sleep(s.delay)
	if block == s.stuck || s.stuck == allStuck {
		if s.entered != nil {
			close(s.entered)
		}
		<-s.gate
	}
	return s.memStore.Put(key, block, data)
}

// A range's answer does not wait for a cache write of its file: the answer's validators
// are recorded under File.confirmMu, not under putMu, which a write holds. Before, every
// new range of a file (a seek's) waited for the write in flight: with writes of 500 ms,
// a read of eight blocks one range each took 3.5 s.
func TestAnAnswerDoesNotWaitForACacheWrite(t *testing.T) {
	const size = 4 * testBlock
	mem, v := patternFile(t, size)
	gate, entered := make(chan struct{}), make(chan struct{})
	f := New(mem, slowPut{memStore: newMemStore(), stuck: 0, gate: gate, entered: entered}, testOptions(), nil)
	defer f.Close()
	defer close(gate)
	fl := f.Open("a.bin", v)
	defer fl.Release()
	p := make([]byte, testBlock)
	if _, err := fl.Read(context.Background(), p, 0, Owner{Handle: 1}, noDecision()); err != nil {
		t.Fatal(err)
	}
	<-entered // block 0's write is in flight, and stays there
	done := make(chan error, 1)
	go func() {
		_, err := fl.Read(context.Background(), p, 2*testBlock, Owner{Handle: 1}, noDecision())
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a new range's read waited for the cache write of another block")
	}
	if err := pattern.Verify(testSeed, p, 2*testBlock); err != nil {
		t.Fatal(err)
	}
}

// A file closed while its blocks wait for the cache disk and opened again at once is not
// fetched again: the new File waits for the old one's writes (Fetcher.Open), which are in
// neither the cache nor any pending map it could see, and so does a second open of the
// key made meanwhile (a scanner and a player together). Before, under load, a cold read
// followed by a second read of a 3 MiB file in the bench's runner test fetched up to 1.75
// times the file.
func TestReopenWaitsForQueuedWrites(t *testing.T) {
	const blocks = 8
	const size = blocks * testBlock
	for _, tc := range []struct {
		name     string
		opens    int   // opens of the key at once after the first read
		stuck    int64 // the block whose write never ends (-1: none)
		min, max int64 // bytes from the origin over all reads
	}{
		{"writes land in time", 1, -1, size, size},
		{"two opens at once", 2, -1, size, size},
		// A disk stuck past drainWait costs a fetch, not a hang: the reopen goes on and
		// fetches the stuck block, and those of the first File queued behind it (its
		// writes take turns on one lock), again.
		{"a stuck write", 1, blocks - 1, size + testBlock, 2 * size},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, v := patternFile(t, size)
			gate := make(chan struct{})
			f := New(mem, slowPut{memStore: newMemStore(), delay: 20 * time.Millisecond, stuck: tc.stuck, gate: gate}, testOptions(), nil)
			defer f.Close()
			defer close(gate)
			read := func(h uint64) {
				fl := f.Open("a.bin", v)
				defer fl.Release()
				p := make([]byte, testBlock)
				for b := int64(0); b < blocks; b++ {
					if _, err := fl.Read(context.Background(), p, b*testBlock, Owner{Handle: h}, noDecision()); err != nil {
						t.Error(err)
						return
					}
					if err := pattern.Verify(testSeed, p, b*testBlock); err != nil {
						t.Error(err)
						return
					}
				}
			}
			read(1)
			start := time.Now()
			var wg sync.WaitGroup
			for h := range tc.opens {
				wg.Go(func() { read(uint64(2 + h)) })
			}
			wg.Wait()
			if took := time.Since(start); took > drainWait+time.Second {
				t.Errorf("the second reads took %v", took)
			}
			if got := mem.Stats().BytesServed; got < tc.min || got > tc.max {
				t.Errorf("the origin served %d bytes for reads of %d, want %d to %d", got, size, tc.min, tc.max)
			}
		})
	}
}

// A cache disk that stops answering (a hung network mount, a dying disk) does not hang
// the reads: once the writers have taken no queued write for the stall bound, blocks go
// to their readers without the cache, and Close gives up on the writes still queued
// instead of waiting for them forever. Without the bound, the streams wait for room in
// the queue and the reads wait for the streams, for ever.
func TestAStuckCacheDiskDoesNotHangReads(t *testing.T) {
	const blocks = 3 * writeQueueBlocks
	const size = blocks * testBlock
	const stall = 200 * time.Millisecond
	mem, v := patternFile(t, size)
	gate := make(chan struct{})
	defer close(gate) // the disk answers again: the writers end
	f := New(mem, slowPut{memStore: newMemStore(), stuck: allStuck, gate: gate}, testOptions(), nil)
	f.writeStall = stall
	fl := f.Open("a.bin", v)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		p := make([]byte, 4*testBlock)
		for off := int64(0); off < size; off += int64(len(p)) {
			if _, err := fl.Read(context.Background(), p, off, Owner{Handle: 1, Run: 1}, ahead(1, off+int64(len(p)), size)); err != nil {
				done <- fmt.Errorf("read at %d: %w", off, err)
				return
			}
			if err := pattern.Verify(testSeed, p, off); err != nil {
				done <- err
				return
			}
		}
		fl.Release()
		f.Close()
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * stall):
		t.Fatalf("reads and Close still waiting for the stuck disk after %v", 20*stall)
	}
	t.Logf("read %d blocks and closed in %v with the disk stuck", blocks, time.Since(start))
	if f.Stats().CacheSkipped == 0 {
		t.Error("no block went to its reader without the cache")
	}
}
