package fetch

import (
	"context"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// Readers holding views of block buffers while streams deliver, the cache writer lands
// and readers give up must never see a buffer reused under them, and every buffer must
// go back to the pool. Returned buffers are poisoned, so a view that outlived its last
// reference fails the pattern check.
func TestViewsNeverSeeReusedBuffers(t *testing.T) {
	size := int64(96*testBlock + 777)
	fx := newFixture(t, size, func(s source.Source) source.Source {
		return memsrc.WithLatency(s, 2*time.Millisecond)
	}, testOptions())
	fx.f.bufs.poison = true

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), testSeed))
			off := rng.Int64N(size)
			for i := 0; i < 150; i++ {
				if rng.IntN(4) == 0 {
					off = rng.Int64N(size) // a seek
				}
				n := 1 + rng.IntN(3*testBlock)
				dec := noDecision()
				dec.Run = g + 1
				if g%2 == 0 {
					dec = ahead(g+1, off+int64(n), off+int64(n)+8*testBlock)
				}
				ctx, cancel := context.WithCancel(context.Background())
				if rng.IntN(10) == 0 {
					cancel() // a reader interrupted while it waits
				}
				v, err := fx.file.ReadView(ctx, off, n, Owner{Handle: uint64(g + 1), Run: dec.Run}, dec)
				cancel()
				if err != nil && err != io.EOF && err != context.Canceled {
					errs <- err
				}
				if rng.IntN(3) == 0 {
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // let the writer land them
				}
				pos := off
				for _, s := range v.Slices {
					if verr := pattern.Verify(testSeed, s, pos); verr != nil {
						errs <- verr
						break
					}
					pos += int64(len(s))
				}
				if err == nil && v.Len() != n {
					t.Errorf("view of %d+%d has %d bytes", off, n, v.Len())
				}
				v.Release()
				off = min(off+int64(n), size-1)
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Streams finish their blocks and the writer lands what is queued; then nothing
	// holds a buffer but the blocks kept for a reader (keep.go), which go with the File
	// (TestKeptBlocksGoWithTheFile).
	kept := func() int64 {
		fx.file.mu.Lock()
		defer fx.file.mu.Unlock()
		return int64(len(fx.file.kept))
	}
	deadline := time.Now().Add(5 * time.Second)
	for fx.f.bufs.out.Load() != kept() {
		if time.Now().After(deadline) {
			t.Fatalf("%d block buffers never returned to the pool", fx.f.bufs.out.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDoubleReleasePanics(t *testing.T) {
	p := newBufPool(16)
	bb := p.get()
	bb.unref()
	defer func() {
		if recover() == nil {
			t.Fatal("second release of a buffer did not panic")
		}
	}()
	bb.unref()
}
