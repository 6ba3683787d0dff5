package fetch

import (
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/readahead"
)

// recordingObserver counts the events it is given.
type recordingObserver struct {
	mu        sync.Mutex
	reads     int
	readBytes int
	blocks    map[Tier]int
	answers   int
}

func (r *recordingObserver) Read(d time.Duration, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	r.readBytes += n
}

func (r *recordingObserver) BlockRead(tier Tier) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blocks[tier]++
}

func (r *recordingObserver) OriginAnswered(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers++
}

// The Observer sees the events Stats counts, one for one: every read with its bytes,
// every block by tier, every range the origin answered.
func TestObserverSeesWhatStatsCount(t *testing.T) {
	const size = 10 * testBlock
	obs := &recordingObserver{blocks: map[Tier]int{}}
	opts := testOptions()
	opts.Observer = obs
	fx := newFixture(t, size, nil, opts)
	const chunk = 3 * testBlock / 2 // reads that straddle blocks
	reads := 0
	for pass := 0; pass < 2; pass++ {
		for off := int64(0); off < size; off += chunk {
			if err := fx.read(t, off, chunk, readahead.Decision{}); err != nil {
				t.Fatal(err)
			}
			reads++
		}
	}
	// Every range was answered before the read that opened it got its block.
	st := fx.f.Stats()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.reads != reads || obs.readBytes != 2*size {
		t.Errorf("observed %d reads of %d bytes, want %d of %d", obs.reads, obs.readBytes, reads, 2*size)
	}
	if int64(obs.blocks[TierCache]) != st.BlocksCached || int64(obs.blocks[TierFetch]) != st.BlocksWaited {
		t.Errorf("observed blocks %v, stats cached %d waited %d", obs.blocks, st.BlocksCached, st.BlocksWaited)
	}
	if obs.blocks[TierCache] == 0 || obs.blocks[TierFetch] == 0 {
		t.Errorf("observed blocks %v: want some of each tier over two passes", obs.blocks)
	}
	if int64(obs.answers) != st.Requests || st.Requests == 0 {
		t.Errorf("observed %d origin answers, stats %d requests", obs.answers, st.Requests)
	}
}
