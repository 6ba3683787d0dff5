package fetch

import (
	"hash/maphash"
	"sync"
)

// Key fences. Blocks are cached under size and second (the cache key) with the ETag
// beside them, so an object replaced within a second by one of the same size keeps its
// key. A new File that finds another ETag there forgets the old blocks (newFile); a write
// queued by the old File, released but not yet drained, could land after that Forget and
// be served as the new object's. Each key has a generation: a File takes it when made,
// a File that forgets another version's blocks raises it, and a write lands only while
// the generation is still its File's. The check and the write hold the key's fence
// shared, the raise and the Forget hold it exclusively, so a write is either done
// before the Forget or refused after it.

// fenceStripes is how many fences the keys share: writes of different keys rarely wait
// for one another's Forget, and the generations live in small maps.
const fenceStripes = 64

type keyFence struct {
	mu   sync.RWMutex
	gens map[string]uint64 // raised generations by File id; absent is 0
}

var fenceSeed = maphash.MakeSeed()

// fence returns the fence of the key with File id.
func (f *Fetcher) fence(id string) *keyFence {
	return &f.fences[maphash.String(fenceSeed, id)%fenceStripes]
}

// current returns id's generation.
func (k *keyFence) current(id string) uint64 {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.gens[id]
}

// supersede raises id's generation and runs forget while no write of id is in flight,
// and returns the new generation. The maps grow by one entry per replacement found
// within a second: rare, and an entry is a few dozen bytes.
func (k *keyFence) supersede(id string, forget func()) uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gens == nil {
		k.gens = map[string]uint64{}
	}
	k.gens[id]++
	forget()
	return k.gens[id]
}

// supersedeFrom is supersede for a File made at generation gen that found its object
// changed: when id has moved past gen, a newer File already forgot this File's version
// (and refuses its writes), and the blocks under the key are that newer File's, checked
// against the origin by it, so neither the raise nor forget happens and it reports false.
// An older File's late news that its own version is gone says nothing about them, and
// forgetting them would also stop the newer File's writes (its generation would be past).
func (k *keyFence) supersedeFrom(id string, gen uint64, forget func()) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gens[id] != gen {
		return false
	}
	if k.gens == nil {
		k.gens = map[string]uint64{}
	}
	k.gens[id]++
	forget()
	return true
}

// enter admits a write of a File made at generation gen, holding the fence shared until
// leave, or refuses it (false, nothing held) when id has moved on.
func (k *keyFence) enter(id string, gen uint64) bool {
	k.mu.RLock()
	if k.gens[id] != gen {
		k.mu.RUnlock()
		return false
	}
	return true
}

func (k *keyFence) leave() { k.mu.RUnlock() }
