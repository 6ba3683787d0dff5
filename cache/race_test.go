package cache

import (
	"errors"
	"testing"
)

// The rules that keep a race from being taken for corruption, or from unlinking a block
// that was just stored, replayed step by step (TestConcurrent hits them only by chance).

func TestEvictedBlockReinstalledBeforeUnlink(t *testing.T) {
	o := testOptions(t)
	o.MaxBytes = 8 * testBS
	c := openT(t, o)
	for b := int64(0); b < 8; b++ {
		put(t, c, keyA, b, testBS)
	}
	c.mu.Lock()
	c.limit = 6 * testBS
	vs := c.evictLocked() // blocks 0 and 1 leave the index; their files are not yet unlinked
	c.limit = o.MaxBytes
	c.mu.Unlock()
	if len(vs) != 2 {
		t.Fatalf("evicted %d blocks, want 2", len(vs))
	}
	put(t, c, keyA, 0, testBS) // a Put brings block 0 back in between
	c.finishEvictions(vs)
	wantHit(t, c, keyA, 0, testBS)
	wantMiss(t, c, keyA, 1)
	if s := c.Stats(); s.Corrupt != 0 {
		t.Errorf("Corrupt = %d", s.Corrupt)
	}
	checkConsistent(t, c)
}

func TestFailedReadOfEvictedOrReplacedBlockIsNotCorruption(t *testing.T) {
	o := testOptions(t)
	o.MaxBytes = 8 * testBS
	c := openT(t, o)
	put(t, c, keyA, 0, testBS)
	lookup := func() (*fileEntry, *blockEntry, uint32) {
		c.mu.Lock()
		defer c.mu.Unlock()
		fe := c.files[keyA]
		e := fe.blocks[0]
		return fe, e, e.gen
	}
	reason := errors.New("simulated failed read")

	// A Get looked block 0 up; then a Put replaced the file; the Get's read "failed".
	fe, e, gen := lookup()
	put(t, c, keyA, 0, testBS)
	c.dropCorrupt(fe, e, gen, reason)
	wantHit(t, c, keyA, 0, testBS)

	// A Get looked block 0 up; then it was evicted and stored again.
	fe, e, gen = lookup()
	for b := int64(1); b <= 8; b++ {
		put(t, c, keyA, b, testBS) // evicts block 0
	}
	if c.Has(keyA, 0) {
		t.Fatal("block 0 not evicted")
	}
	c.dropCorrupt(fe, e, gen, reason) // evicted: nothing to blame
	put(t, c, keyA, 0, testBS)
	c.dropCorrupt(fe, e, gen, reason) // a new entry now: still nothing to blame
	wantHit(t, c, keyA, 0, testBS)
	if s := c.Stats(); s.Corrupt != 0 {
		t.Errorf("Corrupt = %d", s.Corrupt)
	}
	checkConsistent(t, c)

	// The same entry, same generation: that is corruption.
	fe, e, gen = lookup()
	c.dropCorrupt(fe, e, gen, reason)
	if s := c.Stats(); s.Corrupt != 1 || c.Has(keyA, 0) {
		t.Errorf("Corrupt = %d, Has = %v", s.Corrupt, c.Has(keyA, 0))
	}
	checkConsistent(t, c)
}
