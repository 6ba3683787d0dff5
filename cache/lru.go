package cache

// blockEntry is the in-memory index entry of one stored block: 56 bytes, plus ~20 in its
// file's map, so 80k blocks (20 GiB of 256 KiB blocks) cost about 6.5 MB. All fields are
// guarded by Cache.mu.
type blockEntry struct {
	file       *fileEntry
	prev, next *blockEntry // LRU list; nil when not listed
	index      int64       // block number within the file
	stamp      int64       // unix seconds of the last-use stamp in the block's record
	size       int32       // bytes of data
	gen        uint32      // bumped each time a Put replaces the block
	direct     bool        // its data was written with direct I/O, and is read so (directio.go)
}

// lruList is an intrusive doubly linked list of blocks, most recently used at the front.
// An intrusive list saves the 48-byte container/list element per block.
type lruList struct {
	root blockEntry // sentinel: root.next is the most recent, root.prev the least
}

func (l *lruList) init() {
	l.root.next = &l.root
	l.root.prev = &l.root
}

func (l *lruList) pushFront(e *blockEntry) {
	e.prev = &l.root
	e.next = l.root.next
	e.prev.next = e
	e.next.prev = e
}

func (l *lruList) remove(e *blockEntry) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

func (l *lruList) moveToFront(e *blockEntry) {
	if l.root.next == e {
		return
	}
	l.remove(e)
	l.pushFront(e)
}

// back returns the least recently used block, or nil.
func (l *lruList) back() *blockEntry {
	if l.root.prev == &l.root {
		return nil
	}
	return l.root.prev
}
