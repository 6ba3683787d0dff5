package fetch

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// sumMemStore is a memStore that takes checksums from the caller, as *cache.Cache does,
// and checks each against the data.
type sumMemStore struct {
	*memStore
	sums, bad atomic.Int64
}

func (m *sumMemStore) PutSum(key cache.FileKey, block int64, data []byte, sum uint32) error {
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
