package fetch

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/readahead/pace"
	"github.com/playhead/playhead/source"
)

// Owner names the reader a fetch works for: an open handle and the read-ahead policy's
// run id within it (readahead.Decision.Run).
type Owner struct {
	Handle uint64
	Run    int
}

// File is the fetch state of one version of one remote file.
type File struct {
	f       *Fetcher
	id      string
	path    string
	version source.Version // what the listing said; ETag filled once learned
	key     cache.FileKey
	size    int64
	bs      int64
	nblocks int64

	// refs is guarded by Fetcher.mu.
	refs int

	// queuedWrites counts this File's blocks in the cache's write queue, not yet landed.
	// drained is made when the last handle closes and closed once none is queued (then
	// or later; drainedShut records that), so that an Open of the same key can wait for
	// them (see Fetcher.Open). Guarded by Fetcher.wmu.
	queuedWrites int
	drained      chan struct{}
	drainedShut  bool

	// Guarded by mu.
	mu           sync.Mutex
	pending      map[int64]*pending
	kept         map[int64]keptBlock // landed blocks waiting for their first reader (keep.go)
	keptOldest   time.Time           // no entry of kept is older
	released     bool                // the last handle closed: keep nothing more (keep.go)
	rangeStreams []*rangeStream
	err          error               // set when the object changed; every later read fails with it
	failed       map[int64]failure   // blocks whose fetch failed recently
	split        pace.Splitter       // parallel range streams for read-ahead (parallel.go)
	runs         map[Owner]*runState // per reader's run: rate and read-ahead mark (pace.go)
	left         map[uint64]bool     // handles that left a run (seeked away): pace.Setting.Left

	starved atomic.Int64 // sequential reads that waited for a block in flight (parallel.go)
	// delivered counts the bytes this file's ranges delivered (its share of
	// Fetcher.delivered; parallel.go).
	delivered atomic.Int64

	// forgotten is closed once dropCache has forgotten the cached blocks of a changed
	// object; Fetcher.Open waits for it before it starts a File under the same key.
	forgotten chan struct{}
	// putMu is held across each cache write of this File and across dropCache's
	// Forget (see putBlock). Taken before mu, never while holding it.
	putMu sync.Mutex
	// confirmMu orders an origin's answer that vouches for this version (learnETag:
	// the validator it records, the confirmation) against dropCache, which holds it
	// with putMu. Not putMu itself: an answer would then wait for the cache write in
	// flight, and a new range's first bytes (a seek's) for the disk. Taken after putMu,
	// before mu.
	confirmMu sync.Mutex

	// cachedBefore: the cache held a validator for this object when the File started,
	// from this run or an earlier one. recheck: its blocks still have to be checked
	// against the origin before the first read (revalidate.go); recheckMu serialises
	// that check.
	cachedBefore bool
	recheck      atomic.Bool
	recheckMu    sync.Mutex

	// etagRecorded: the cache holds version.ETag beside this key's blocks (guarded by
	// mu). learnETag records it at the first answer of the origin, before any block of
	// this File is put.
	etagRecorded bool

	// listedMatch: the version opened came with the strong ETag recorded beside the
	// cached blocks, so they need no check against the origin (confirm.go).
	listedMatch bool

	// prepared: the source was asked for connections for a trial of parallel streams
	// (parallel.go); guarded by mu.
	prepared bool

	// gen is the generation of this File's key when it was made (keyfence.go): its
	// cache writes land only while the key is still at it.
	gen uint64
}

func newFile(f *Fetcher, id, path string, v source.Version, key cache.FileKey) *File {
	bs := f.opts.BlockSize
	fl := &File{f: f, id: id, path: path, version: v, key: key, size: v.Size, bs: bs,
		nblocks: (v.Size + bs - 1) / bs, pending: map[int64]*pending{}, kept: map[int64]keptBlock{}, failed: map[int64]failure{},
		runs: map[Owner]*runState{}, left: map[uint64]bool{}, forgotten: make(chan struct{})}
	val, ok := f.store.Validator(key)
	if ok && val.ETag != "" && v.ETag != "" && val.ETag != v.ETag {
		// The blocks under this key are of another version: same size and second, but
		// the listing names another ETag (an object replaced within a second; object
		// stores list every ETag). Drop them rather than adopt their ETag, which would
		// serve them, or fail every read of the new object with ESTALE. No File of this
		// key is open (Open holds f.mu and found none), but a released one may still
		// have writes queued: the fence waits for those in flight and refuses the rest.
		fl.gen = f.fence(id).supersede(id, func() {
			if err := f.store.Forget(key); err != nil {
				f.log.Warn("cannot drop cached blocks of a replaced object", "path", path, "err", err)
			}
		})
		return fl
	}
	fl.gen = f.fence(id).current(id)
	if ok && !val.IsZero() {
		fl.cachedBefore = true
		// The listing this File was opened from names the strong ETag recorded beside
		// its blocks (object stores list every ETag): the origin vouched for them when
		// it listed, within the listing TTL, as a HEAD would now.
		fl.listedMatch = v.ETag != "" && v.ETag == val.ETag && !strings.HasPrefix(v.ETag, "W/")
		if !val.ModTime.IsZero() {
			fl.version.ModTime = val.ModTime
		}
		if val.ETag != "" {
			fl.version.ETag = val.ETag
			fl.etagRecorded = true
		}
	}
	return fl
}

// Size is the file's size in bytes.
func (fl *File) Size() int64 { return fl.size }

// HeadRead reports whether the file's first block is cached or on its way (read by an
// earlier handle, an earlier run of the daemon, or a peer's range): vfs.File.ResumeElsewhere.
func (fl *File) HeadRead() bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.present(0)
}

// Release drops this reference; the last one stops the file's streams.
func (fl *File) Release() { fl.f.release(fl) }

func (fl *File) isFailed() bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.err != nil
}

// blockLen is the length of block b.
func (fl *File) blockLen(b int64) int64 { return min(fl.bs, fl.size-b*fl.bs) }

func (fl *File) blockUp(off int64) int64 { return (off + fl.bs - 1) / fl.bs }
