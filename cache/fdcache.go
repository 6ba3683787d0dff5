package cache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// The fd cache keeps the data and index files of recently used key directories open, so
// that Get and Put cost no open(2): on ext4 an open(O_CREAT) per block was the largest
// single cost of the old layout. Handles are reference counted, so evicting one from the
// cache (or Forget dropping its directory) never closes a descriptor another goroutine
// is reading: the last user closes it. A descriptor number therefore cannot be reused
// for another file under a reader's feet.

// maxOpenFiles bounds the key directories held open (three descriptors each: the index,
// the data, and the data again for direct I/O). A mount streams a handful of files at
// once; 64 covers many readers plus the files eviction is trimming, at 192 descriptors:
// well under the soft limit Go raises at startup.
const maxOpenFiles = 64

// errHandlesDropped: the directory was dropped (Forget, eviction of its last block,
// damage) after the caller looked it up. A plain miss for Get, a retry for Put.
var errHandlesDropped = errors.New("key directory dropped")

// fileHandles are the open data and index files of one key directory.
type fileHandles struct {
	data, index *os.File
	// direct is the data file opened for direct I/O, nil where the file system does not
	// take it (directio.go); align is what its transfers must be aligned to.
	direct *os.File
	align  int
	// Their descriptors, for the raw preads of Get: valid while a reference is held.
	dataFd, indexFd, directFd int

	// Guarded by fdCache.mu.
	fe         *fileEntry
	refs       int32 // users, plus one while the cache lists it
	prev, next *fileHandles
}

func (h *fileHandles) close() {
	if h.direct != nil {
		h.direct.Close()
	}
	h.data.Close()
	h.index.Close()
}

// fdCache is an LRU of open key directories. Lock order: after fileEntry.mu and
// Cache.mu; nothing is taken while mu is held, and mu is never held across open/close.
type fdCache struct {
	max    int
	direct bool // open data files for direct I/O too (Options.BufferedIO unset)

	mu     sync.Mutex
	closed bool
	n      int         // handles listed
	root   fileHandles // sentinel: root.next is the most recently used
}

func (fc *fdCache) init(limit int, direct bool) {
	fc.max = limit
	fc.direct = direct
	fc.root.next = &fc.root
	fc.root.prev = &fc.root
}

// acquire returns fe's open files, opening them if needed (creating them if create).
// The caller must release them. Errors wrap errCorrupt when a file is not a regular
// file, and the open(2) error otherwise (ENOENT: missing).
func (fc *fdCache) acquire(fe *fileEntry, create bool) (*fileHandles, error) {
	fc.mu.Lock()
	if h := fc.lookupLocked(fe); h != nil || fc.closed || fe.handlesDropped {
		fc.mu.Unlock()
		return h, fc.errLocked(fe, h)
	}
	fc.mu.Unlock()

	h, err := openHandles(fe.dir, create, fc.direct)
	if err != nil {
		return nil, err
	}
	var doomed []*fileHandles
	fc.mu.Lock()
	if cur := fc.lookupLocked(fe); cur != nil || fc.closed || fe.handlesDropped {
		// Another goroutine opened them meanwhile, or they may no longer be cached.
		fc.mu.Unlock()
		h.close()
		return cur, fc.errLocked(fe, cur)
	}
	h.fe = fe
	h.refs = 2 // the caller and the list
	fe.handles = h
	fc.pushFrontLocked(h)
	fc.n++
	for fc.n > fc.max {
		if d := fc.unlistLocked(fc.root.prev); d != nil {
			doomed = append(doomed, d)
		}
	}
	fc.mu.Unlock()
	for _, d := range doomed {
		d.close()
	}
	return h, nil
}

// lookupLocked returns fe's listed handles with a reference taken, or nil.
func (fc *fdCache) lookupLocked(fe *fileEntry) *fileHandles {
	h := fe.handles
	if h == nil || fc.closed {
		return nil
	}
	h.refs++
	if fc.root.next != h {
		fc.removeLocked(h)
		fc.pushFrontLocked(h)
	}
	return h
}

// errLocked explains why acquire returns no handles (h == nil).
func (fc *fdCache) errLocked(fe *fileEntry, h *fileHandles) error {
	switch {
	case h != nil:
		return nil
	case fc.closed:
		return ErrClosed
	default:
		return fmt.Errorf("%v: %w", fe.key, errHandlesDropped)
	}
}

// release drops a reference taken by acquire.
func (fc *fdCache) release(h *fileHandles) {
	fc.mu.Lock()
	h.refs--
	last := h.refs == 0
	fc.mu.Unlock()
	if last {
		h.close()
	}
}

// forget closes fe's files (once unused) and refuses to open them again: fe's directory
// is being dropped, and a later open could find a new directory of the same key.
func (fc *fdCache) forget(fe *fileEntry) {
	fc.mu.Lock()
	fe.handlesDropped = true
	d := fc.unlistLocked(fe.handles)
	fc.mu.Unlock()
	if d != nil {
		d.close()
	}
}

// closeAll closes every file (once unused) and makes acquire fail with ErrClosed.
func (fc *fdCache) closeAll() {
	fc.mu.Lock()
	fc.closed = true
	fc.mu.Unlock()
	fc.purge()
}

// purge closes every file (once unused); the next acquire opens them again.
func (fc *fdCache) purge() {
	var doomed []*fileHandles
	fc.mu.Lock()
	for fc.n > 0 {
		if d := fc.unlistLocked(fc.root.prev); d != nil {
			doomed = append(doomed, d)
		}
	}
	fc.mu.Unlock()
	for _, d := range doomed {
		d.close()
	}
}

// unlistLocked takes h (if not nil) off the list and drops the list's reference,
// returning h if that was the last one and the caller must close it.
func (fc *fdCache) unlistLocked(h *fileHandles) *fileHandles {
	if h == nil {
		return nil
	}
	fc.removeLocked(h)
	fc.n--
	h.fe.handles = nil
	h.refs--
	if h.refs == 0 {
		return h
	}
	return nil
}

func (fc *fdCache) pushFrontLocked(h *fileHandles) {
	h.prev = &fc.root
	h.next = fc.root.next
	h.prev.next = h
	h.next.prev = h
}

func (fc *fdCache) removeLocked(h *fileHandles) {
	h.prev.next = h.next
	h.next.prev = h.prev
	h.prev, h.next = nil, nil
}

// openHandles opens (or creates) the data and index files of the key directory dir, and
// the data file for direct I/O too if direct and the file system takes it.
func openHandles(dir string, create, direct bool) (*fileHandles, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
	}
	open := func(name string) (*os.File, error) {
		f, err := os.OpenFile(filepath.Join(dir, name), flag, filePerm)
		if err != nil {
			return nil, err
		}
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			f.Close()
			if err == nil {
				err = fmt.Errorf("%w: %s is not a regular file", errCorrupt, f.Name())
			}
			return nil, err
		}
		return f, nil
	}
	index, err := open(indexName)
	if err != nil {
		return nil, err
	}
	data, err := open(dataName)
	if err != nil {
		index.Close()
		return nil, err
	}
	h := &fileHandles{data: data, index: index, dataFd: int(data.Fd()), indexFd: int(index.Fd()), directFd: -1}
	if direct {
		if h.direct, h.align = directHandle(dir); h.direct != nil {
			h.directFd = int(h.direct.Fd())
		}
	}
	return h, nil
}
