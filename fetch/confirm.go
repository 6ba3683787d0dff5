package fetch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/source"
)

// Confirmation: is this File still the origin's object?
//
// Cached blocks are filed under the size and modification time a listing reports
// (source.Version.CacheKey), so a restart finds them without asking the origin. A listing
// cannot always tell two versions apart (nginx's HTML index gives sizes only; a
// replacement may keep size and second), so the origin itself is asked (Stat: a HEAD)
// and its answer compared with the validator recorded beside the blocks:
//   - at open (Confirm), when the File's version was last confirmed longer ago than the
//     caller trusts its listing, or never in this run while blocks from an earlier run
//     are cached;
//   - at the first read (revalidate), for callers that read without Confirm.
//
// Every range the origin answers with matching validators confirms the version too
// (learnETag), so a file being read is confirmed continuously and costs no HEAD. An
// origin that cannot answer does not stop playback of what is cached: the check counts
// as made, and the next one is due after maxAge again.

// maxConfirmed bounds the confirmation times kept (Fetcher.confirmed).
const maxConfirmed = 16 << 10

// Confirm asks the origin whether this File is still its object, unless the origin
// vouched for it within maxAge (maxAge <= 0: always ask, when anything of the File may
// already be in a cache). A File whose object changed is failed, its blocks are dropped
// and Confirm returns an error wrapping source.ErrChanged: the caller releases it and
// opens the new version.
func (fl *File) Confirm(ctx context.Context, maxAge time.Duration) error {
	if !fl.dueForCheck(maxAge) {
		return nil
	}
	fl.recheckMu.Lock()
	defer fl.recheckMu.Unlock()
	if !fl.dueForCheck(maxAge) { // another open checked while we waited
		return nil
	}
	return fl.check(ctx)
}

// dueForCheck reports whether the origin has to be asked before this File is trusted.
func (fl *File) dueForCheck(maxAge time.Duration) bool {
	if err := fl.Err(); err != nil {
		return true // check reports the failure at once
	}
	at, ok := fl.f.confirmed.Peek(fl.id)
	if !ok {
		// Never confirmed in this run: only blocks from an earlier run can be stale
		// (a File with nothing cached learns the version from its first range), and
		// not those whose ETag the listing gave (listedMatch).
		return fl.cachedBefore && !fl.listedMatch
	}
	return time.Since(at) > maxAge
}

// revalidate makes the check of a File with blocks from an earlier run before its first
// read, if Confirm has not made it.
func (fl *File) revalidate(ctx context.Context) error {
	if !fl.recheck.Load() {
		return nil
	}
	fl.recheckMu.Lock()
	defer fl.recheckMu.Unlock()
	if !fl.recheck.Load() {
		return nil
	}
	return fl.check(ctx)
}

// check asks the origin for the object's validators. Caller holds recheckMu.
func (fl *File) check(ctx context.Context) error {
	if err := fl.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, fl.f.opts.IOTimeout)
	defer cancel()
	e, err := fl.f.src.Stat(ctx, fl.path)
	switch {
	case errors.Is(err, source.ErrNotFound):
		err = &source.PathError{Op: "open", Path: fl.path, Off: -1,
			Err: fmt.Errorf("%w: no longer at the origin", source.ErrChanged)}
	case err != nil:
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return err // the caller gave up: nothing was learned
		}
		fl.f.log.Warn("cannot check cached blocks against the origin; serving them", "path", fl.path, "err", err)
		fl.recheck.Store(false)
		fl.f.confirmed.Add(fl.id, time.Now())
		return nil
	case e.IsDir:
		err = &source.PathError{Op: "open", Path: fl.path, Off: -1,
			Err: fmt.Errorf("%w: now a directory at the origin", source.ErrChanged)}
	default:
		err = fl.learnETag(e.Version) // records the confirmation when it matches
	}
	fl.recheck.Store(false)
	if err != nil {
		fl.fail(err)
	}
	return err
}

// fail records that the origin object is no longer this File's version: every later
// read fails with err, the cached blocks are forgotten, and the Fetcher's OnChange hook
// is told, once.
func (fl *File) fail(err error) {
	fl.mu.Lock()
	first := fl.changed(err)
	fl.mu.Unlock()
	if first {
		fl.f.notifyChange(fl.path)
		fl.dropCache(err)
	}
}

// Err is the error every read of this File fails with since its object changed, or nil.
func (fl *File) Err() error {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.err
}

// Version is the version this File serves: the listing's, with the validators the
// origin sent filled in once learned.
func (fl *File) Version() source.Version {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.version
}

// notifyChange tells the OnChange hook that path's object changed, before the old
// blocks are forgotten and a File of the new version can start: the hook drops what
// named the old version (a listing) first. It must not block (see Options.OnChange).
func (f *Fetcher) notifyChange(path string) {
	if h := f.opts.OnChange; h != nil {
		h(path)
	}
}

// Supersede tells the Fetcher that a listing read from the origin now shows path at
// version cur (gone: no such file any more). Every open File of path whose version
// cur contradicts is failed as changed, so its handles get old bytes already delivered
// or an error, never the new object's bytes.
func (f *Fetcher) Supersede(path string, cur source.Version, gone bool) {
	var stale []*File
	f.mu.Lock()
	for _, fl := range f.files {
		if fl.path == path {
			stale = append(stale, fl)
		}
	}
	f.mu.Unlock()
	for _, fl := range stale {
		v := fl.Version()
		if !gone && v.Matches(cur) {
			continue
		}
		why := "no longer at the origin"
		if !gone {
			why = fmt.Sprintf("the listing shows %v, expected %v", cur, v)
		}
		fl.fail(&source.PathError{Op: "read", Path: path, Off: -1, Err: fmt.Errorf("%w: %s", source.ErrChanged, why)})
	}
}

// changed records that the origin object is no longer this version: every read of this
// File fails from now on. It reports whether this was the first report, in which case
// the caller must call dropCache after releasing mu. Caller holds mu.
func (fl *File) changed(err error) (first bool) {
	if fl.err != nil {
		return false
	}
	fl.err = err
	fl.expireKept(time.Time{}, true, true) // a changed object's bytes are read by nobody
	return true
}

// dropCache forgets the cached blocks of a changed object. Call without mu: it deletes
// files, and every reader and stream of the file waits on mu.
func (fl *File) dropCache(err error) {
	defer close(fl.forgotten)
	fl.putMu.Lock() // a write in flight lands first, and is forgotten with the rest
	defer fl.putMu.Unlock()
	fl.confirmMu.Lock() // an answer being recorded is recorded first (learnETag)
	defer fl.confirmMu.Unlock()
	// The next File under this key (same size and time) must ask the origin before it
	// trusts anything: a zero confirmation time is always due (dueForCheck).
	fl.f.confirmed.Add(fl.id, time.Time{})
	// Forgotten under the key's fence, raising its generation (keyfence.go): another File
	// of this key, of the same old version, may still have writes queued (a handle of it
	// released while its read-ahead drained), and putMu is this File's only. Such a write
	// would land after the Forget and the next File of the key, the new version's, would
	// serve it as its own: with a listing that gives no ETag and no exact time (nginx's
	// HTML) every version of a size shares the key, and a File opened from it adopts the
	// ETag recorded there, is found changed here, and its successor reads what lands after.
	// A File of an older generation (released, its range answered late) leaves the key
	// to the newer File that already dropped this version (keyFence.supersedeFrom).
	dropped := fl.f.fence(fl.id).supersedeFrom(fl.id, fl.gen, func() {
		if ferr := fl.f.store.Forget(fl.key); ferr != nil {
			fl.f.log.Warn("cannot drop cached blocks of changed object", "path", fl.path, "err", ferr)
		}
	})
	if !dropped {
		fl.f.log.Info("object changed at origin; a newer version's blocks are kept", "path", fl.path, "err", err)
		return
	}
	fl.f.log.Warn("object changed at origin; its cached blocks are dropped", "path", fl.path, "err", err)
}

// learnETag checks the origin's validators against what we know, learns the ETag and
// modification time if the listing did not give them, and records the ETag (or, without
// one, the time) beside the cached blocks, once per File, so a restart, or a later File
// of another version under the same key, can tell the blocks belong to this object.
// It returns an error wrapping source.ErrChanged on a mismatch.
func (fl *File) learnETag(v source.Version) error {
	fl.mu.Lock()
	if !fl.version.Matches(v) {
		fl.mu.Unlock()
		return &source.PathError{Op: "read", Path: fl.path, Off: -1,
			Err: fmt.Errorf("%w: expected %v, origin has %v", source.ErrChanged, fl.version, v)}
	}
	var learned cache.Validator // to record beside the cached blocks, if learned now
	if fl.version.ETag == "" && v.ETag != "" {
		fl.version.ETag = v.ETag
		learned.ETag = v.ETag
	}
	if fl.version.ModTime.IsZero() && !v.ModTime.IsZero() {
		// A listing without usable times (nginx's HTML) and an origin without ETags:
		// the time the first answer gave is then the only validator, and without it
		// the next ranges would be unconditional and a same-size replacement would mix
		// old and new bytes in one handle. The cache key has no time then, so the time
		// is recorded too, or after a restart the blocks would pass for any version.
		fl.version.ModTime = v.ModTime
		if fl.version.ETag == "" {
			learned.ModTime = v.ModTime
		}
	}
	if fl.version.ETag != "" && !fl.etagRecorded {
		// Also an ETag the listing gave (object stores list every ETag), learned from
		// nothing: the cache key holds only the size and the second, and a File of an
		// object replaced within that second tells the old blocks apart by the ETag
		// recorded beside them (newFile), once this File is released too.
		learned.ETag = fl.version.ETag
		fl.etagRecorded = true
	}
	fl.mu.Unlock()
	// Recorded under confirmMu, after the File is found not failed: dropCache holds
	// confirmMu across its Forget and its mark that the key needs a check, so neither a
	// validator nor a confirmation of the old version outlives a change found meanwhile.
	fl.confirmMu.Lock()
	defer fl.confirmMu.Unlock()
	if fl.isFailed() {
		return fl.Err() // this answer matched, but the File is already known changed
	}
	if fence := fl.f.fence(fl.id); !learned.IsZero() && fence.enter(fl.id, fl.gen) {
		// Fenced as a block is (putBlock): a File of the key found changed since must not
		// have this old version's validator recorded over its Forget.
		if err := fl.f.store.SetValidator(fl.key, learned); err != nil {
			fl.f.log.Debug("cannot record validator in cache", "path", fl.path, "err", err)
		}
		fence.leave()
	}
	// The origin has just vouched for this object: no revalidation needed this run.
	fl.recheck.Store(false)
	fl.f.confirmed.Add(fl.id, time.Now())
	return nil
}
