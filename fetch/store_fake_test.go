package fetch

import (
	"context"
	"errors"
	"sync"

	"github.com/playhead/playhead/cache"
)

// memStore is an in-memory BlockStore for the scheduler's tests. failPuts simulates a
// full cache disk.
type memStore struct {
	mu       sync.Mutex
	blocks   map[cache.FileKey]map[int64][]byte
	meta     map[cache.FileKey]cache.Validator
	failPuts bool
	puts     int
	gets     int // blocks read back
}

func newMemStore() *memStore {
	return &memStore{blocks: map[cache.FileKey]map[int64][]byte{}, meta: map[cache.FileKey]cache.Validator{}}
}

func (m *memStore) Get(_ context.Context, key cache.FileKey, block int64, dst []byte) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blocks[key][block]
	if !ok {
		return 0, false
	}
	m.gets++
	return copy(dst, b), true
}

func (m *memStore) Has(key cache.FileKey, block int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.blocks[key][block]
	return ok
}

func (m *memStore) Put(key cache.FileKey, block int64, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failPuts {
		return errors.New("no space left on device")
	}
	if m.blocks[key] == nil {
		m.blocks[key] = map[int64][]byte{}
	}
	m.blocks[key][block] = append([]byte(nil), data...)
	m.puts++
	return nil
}

func (m *memStore) Forget(key cache.FileKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.blocks, key)
	delete(m.meta, key)
	return nil
}

func (m *memStore) Validator(key cache.FileKey) (cache.Validator, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.meta[key]
	return e, ok
}

func (m *memStore) SetValidator(key cache.FileKey, v cache.Validator) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.meta[key] = v
	return nil
}

func (m *memStore) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, b := range m.blocks {
		n += len(b)
	}
	return n
}
