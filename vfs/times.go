package vfs

import (
	"context"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/playhead/playhead/source"
)

// The time a directory shows is its parent listing's time for it. Where the listing gives
// none (Go's http.FileServer, the in-memory source) it is the newest time among the
// directory's own entries, known once the directory has been listed: a stat never lists a
// directory just for its time, so `ls -l` of a parent costs no request per child. The
// root has no parent listing; it is listed for its time (through the listing cache, so at
// most once per ListTTL).
//
// Newest times are kept apart from the listing cache, for many more directories than it
// holds, so that a listing that expires or is evicted does not turn a directory's time
// back to unknown: the time shown changes only when a new listing of the directory does.
// They are bounded too (maxDirTimes, least recently used first), so a daemon walking a
// huge tree keeps bounded memory; a directory forgotten here shows its time again once
// listed.

// maxDirTimes bounds the directories whose newest entry time is remembered.
const maxDirTimes = 64 << 10

// dirTimes remembers the newest entry time of the directories listed.
type dirTimes struct {
	once   sync.Once
	newest *lru.Cache[string, time.Time] // by directory path; safe for concurrent use
}

func (d *dirTimes) cache() *lru.Cache[string, time.Time] {
	d.once.Do(func() { d.newest, _ = lru.New[string, time.Time](maxDirTimes) })
	return d.newest
}

// noteListing records the newest time among the entries of a fresh listing of dir.
func (fs *FS) noteListing(dir string, entries map[string]source.Entry) {
	var newest time.Time
	for _, e := range entries {
		if t := e.Time(); t.After(newest) {
			newest = t
		}
	}
	if newest.IsZero() {
		fs.times.cache().Remove(dir)
		return
	}
	fs.times.cache().Add(dir, newest)
}

// withDirTime gives the directory entry e at p its time: the parent listing's if it has
// one, else the newest of its own entries when it has been listed.
func (fs *FS) withDirTime(p string, e source.Entry) source.Entry {
	if !e.ModTime.IsZero() {
		return e
	}
	e.ModTime, _ = fs.times.cache().Get(p)
	return e
}

// rootEntry describes the root directory. It never fails: a root that cannot be listed
// is still a directory (so the mount point stats while the origin is away), shown with
// the time of its last listing, or none.
func (fs *FS) rootEntry(ctx context.Context) source.Entry {
	if _, err := fs.listing(ctx, ""); err != nil {
		fs.log.Debug("cannot list the root for its time", "err", err)
	}
	return fs.withDirTime("", source.Entry{Name: "", IsDir: true, Version: source.AnyVersion})
}
