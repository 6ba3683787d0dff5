package fetch

import (
	"context"
	"errors"
	"fmt"

	"github.com/playhead/playhead/source"
)

// Revalidation. Cached blocks are filed under the size and modification time a listing
// reports (source.Version.CacheKey), so a restart finds them without asking the origin.
// An object replaced while the mount was down by one of the same size and time (the same
// second, or a listing that gives no time) would then be served from the old blocks. So
// the first read of a File whose blocks come from an earlier run asks the origin once
// (Stat: a HEAD) and compares the answer with the validator recorded beside the blocks
// (the ETag, or the Last-Modified where there is none). It costs one round trip per file
// and run of the mount, only for files cached by an earlier run: blocks fetched during
// this run were checked against the origin as they arrived (learnETag). An origin that
// cannot answer does not stop playback of what is cached: the check is skipped and made
// again at the next open.

// revalidate makes the check described above if this File still needs it. It returns
// an error wrapping source.ErrChanged when the origin has another object now, after the
// old blocks are forgotten.
func (fl *File) revalidate(ctx context.Context) error {
	if !fl.recheck.Load() {
		return nil
	}
	fl.recheckMu.Lock()
	defer fl.recheckMu.Unlock()
	if !fl.recheck.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, fl.f.opts.IOTimeout)
	defer cancel()
	e, err := fl.f.src.Stat(ctx, fl.path)
	switch {
	case errors.Is(err, source.ErrNotFound):
		err = &source.PathError{Op: "read", Path: fl.path, Off: -1,
			Err: fmt.Errorf("%w: no longer at the origin", source.ErrChanged)}
	case err != nil:
		fl.f.log.Warn("cannot check cached blocks against the origin; serving them", "path", fl.path, "err", err)
		fl.recheck.Store(false)
		return nil
	default:
		err = fl.learnETag(e.Version) // marks the File checked when it matches
	}
	fl.recheck.Store(false)
	if err == nil {
		return nil
	}
	fl.mu.Lock()
	first := fl.changed(err)
	fl.mu.Unlock()
	if first {
		fl.dropCache(err)
	}
	return err
}

// markChecked records that the File's cached blocks are known to be the origin's
// current object for the rest of this run.
func (f *Fetcher) markChecked(id string) {
	f.mu.Lock()
	f.checked[id] = true
	f.mu.Unlock()
}
