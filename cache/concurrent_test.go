package cache

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/playhead/playhead/internal/pattern"
)

// Many goroutines Put, Get, evict and Forget the same and different blocks. Under -race
// this checks the locking; the assertions check that no race is ever mistaken for a
// corrupt block, every hit has the right bytes, and index and disk agree at the end.
func TestConcurrent(t *testing.T) {
	o := testOptions(t)
	o.MaxBytes = 16 * testBS // far fewer than the 72 blocks in play: constant eviction
	c := openT(t, o)
	keys := []FileKey{keyA, keyB, {Source: "s3://bucket", Path: "c", Version: "1-1"}}
	const (
		workers = 8
		ops     = 300
		nblocks = 24
		lastLen = 999 // the last block of each file is short
	)
	size := func(b int64) int {
		if b == nblocks-1 {
			return lastLen
		}
		return testBS
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42)) // seeded: a failure replays
			dst := make([]byte, testBS)
			for range ops {
				k := keys[rng.IntN(len(keys))]
				b := rng.Int64N(nblocks)
				switch op := rng.IntN(100); {
				case op < 45:
					if n, ok := c.Get(context.Background(), k, b, dst); ok {
						if n != size(b) {
							t.Errorf("Get %v block %d: %d bytes, want %d", k, b, n, size(b))
						} else if err := pattern.Verify(seedOf(k), dst[:n], b*testBS); err != nil {
							t.Errorf("Get %v block %d: %v", k, b, err)
						}
					}
				case op < 85:
					if err := c.Put(k, b, blockOf(c, k, b, size(b))); err != nil {
						t.Errorf("Put: %v", err)
					}
				case op < 90:
					c.Has(k, b)
				case op < 93:
					if err := c.Forget(k); err != nil {
						t.Errorf("Forget: %v", err)
					}
				case op < 97:
					if err := c.SetValidator(k, Validator{ETag: `"v1"`}); err != nil {
						t.Errorf("SetValidator: %v", err)
					}
				default:
					if v, ok := c.Validator(k); ok && v != (Validator{ETag: `"v1"`}) {
						t.Errorf("Validator = %+v", v)
					}
					c.Stats()
				}
			}
		})
	}
	wg.Wait()
	s := c.Stats()
	t.Logf("stats %+v", s)
	if s.Corrupt != 0 {
		t.Errorf("%d races were taken for corruption", s.Corrupt)
	}
	if s.Hits == 0 || s.Evictions == 0 {
		t.Errorf("the test did not exercise hits and evictions: %+v", s)
	}
	checkConsistent(t, c)
}
