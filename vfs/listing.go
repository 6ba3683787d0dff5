package vfs

import (
	"context"
	"path"
	"strings"
	"time"

	"github.com/playhead/playhead/fetch"
	"github.com/playhead/playhead/source"
)

// maxDirs bounds the listings kept. A listing forgotten here is read again from the
// origin at its next use; memory stays bounded for a daemon that walks a huge tree.
const maxDirs = 4096

// listing returns the cached listing of dir, reading it from the origin when stale.
// A listing read from the origin is compared with the one it replaces: a file whose
// size or time changed, or that is gone, is reported changed (see changedEntries), so
// open handles of the old object and the kernel's pages of it are dropped at once.
func (fs *FS) listing(ctx context.Context, dir string) (map[string]source.Entry, error) {
	return fs.listingAged(ctx, dir, false)
}

// listingAged is listing; with stale, a listing past its TTL (not one invalidated, whose
// expiry is zero) is returned as it is, and one background listing of dir, at most, is
// sent to replace it.
func (fs *FS) listingAged(ctx context.Context, dir string, stale bool) (map[string]source.Entry, error) {
	now := time.Now()
	fs.mu.Lock()
	old, _ := fs.dirs.Get(dir)
	fresh := old != nil && now.Before(old.expires)
	usable := fresh || (stale && old != nil && !old.expires.IsZero())
	if usable && !fresh && !fs.refreshing[dir] && fs.bg.Err() == nil {
		fs.refreshing[dir] = true
		fs.bgWait.Add(1)
		go fs.refreshListing(dir)
	}
	fs.mu.Unlock()
	if usable {
		return old.entries, nil
	}
	list, err := fs.src.List(ctx, dir)
	if err != nil {
		return nil, err
	}
	m := make(map[string]source.Entry, len(list))
	for _, e := range list {
		if e.Name == "" || strings.ContainsAny(e.Name, "/\x00") || e.Name == "." || e.Name == ".." {
			continue // a listing never names anything outside this directory
		}
		if _, dup := m[e.Name]; !dup {
			m[e.Name] = e
		}
	}
	fs.noteListing(dir, m)
	// Without caching (a negative TTL) the listing is still kept, already expired, so
	// the next one can be compared with it.
	expires := now.Add(fs.opts.ListTTL)
	if fs.opts.ListTTL < 0 {
		expires = time.Time{}
	}
	fs.mu.Lock()
	fs.dirs.Add(dir, &dirListing{entries: m, expires: expires})
	fs.mu.Unlock()
	if old != nil {
		for _, name := range changedEntries(old.entries, m) {
			c, ok := m[name]
			fs.fetcher.Supersede(path.Join(dir, name), c.Version, !ok || c.IsDir)
		}
	}
	return m, nil
}

// refreshListing lists dir again in the background, bounded by the fetcher's I/O
// timeout and cancelled by Close; a failure leaves the expired listing in place, and
// the next open that wants a fresh one asks again.
func (fs *FS) refreshListing(dir string) {
	defer fs.bgWait.Done()
	timeout := fs.opts.Fetch.IOTimeout
	if timeout <= 0 {
		timeout = fetch.DefaultOptions().IOTimeout
	}
	ctx, cancel := context.WithTimeout(fs.bg, timeout)
	defer cancel()
	if _, err := fs.listingAged(ctx, dir, false); err != nil && fs.bg.Err() == nil {
		fs.log.Debug("background listing", "dir", dir, "err", err)
	}
	fs.mu.Lock()
	delete(fs.refreshing, dir)
	fs.mu.Unlock()
}

// changedEntries names the files of old that are gone from cur, or whose size or time
// in cur contradicts old's. A listing that does not give a field (nginx's HTML gives no
// exact time) cannot contradict it.
func changedEntries(old, cur map[string]source.Entry) []string {
	var out []string
	for name, o := range old {
		if o.IsDir {
			continue
		}
		c, ok := cur[name]
		if !ok || c.IsDir || !o.Version.Matches(c.Version) {
			out = append(out, name)
		}
	}
	return out
}

// invalidate marks the cached listing of the directory holding p as expired; it is
// kept until the next listing replaces it, so the two can be compared.
func (fs *FS) invalidate(p string) {
	dir := strings.TrimSuffix(path.Dir("/"+p), "/")
	dir = strings.TrimPrefix(dir, "/")
	fs.mu.Lock()
	if d, ok := fs.dirs.Peek(dir); ok {
		d.expires = time.Time{}
	}
	fs.mu.Unlock()
}
