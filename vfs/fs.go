// Package vfs is playhead's library face: open a source, open a file, and read it through
// an io.ReaderAt or io.ReadSeekCloser with the same read-ahead, block cache and fetch
// scheduler the FUSE mount uses. No FUSE needed.
//
//	src, _ := httpsrc.New("https://media.example/films/", httpsrc.Options{})
//	fsys, _ := vfs.New(src, vfs.DefaultOptions())
//	defer fsys.Close()
//	f, _ := fsys.Open(ctx, "big.mkv")
//	defer f.Close()
//	io.Copy(dst, f)
//
// Design: directory listings are cached for ListTTL and are the source of truth for
// sizes and versions (a listing without sizes is completed by a Stat per file, on demand).
// Each open File has its own read-ahead policy (several runs per handle, so two
// readers of one handle keep their own windows) and shares the fetch state of the remote
// object with every other open of the same version. A File opened with OpenExact has no
// policy: it fetches the range it was opened for and what its reads ask, nothing ahead
// (the peer tier's server reads a peer's range so).
//
// Times: a file shows the listing's time where the listing has one (to its precision),
// else its version's (Last-Modified, from the HEAD that a listing without sizes needs);
// a directory shows its parent listing's time, else its newest entry's (times.go).
//
// Traps: a File's version is fixed at Open. When the origin replaces the object, reads of
// that File fail with an error wrapping source.ErrChanged (old bytes or an error, never a
// mix) and the directory's listing is dropped so the next Open sees the new object.
package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/fetch"
	"github.com/playhead/playhead/readahead"
	"github.com/playhead/playhead/source"
)

// Options configure a FS. Start from DefaultOptions.
type Options struct {
	// Cache configures the on-disk block cache (directory, size limit, block size).
	Cache cache.Options
	// ReadAhead configures the read-ahead policy; ReadAhead.MaxWindow is --read-ahead.
	ReadAhead readahead.Config
	// Fetch configures the fetch scheduler. Its BlockSize is forced to Cache.BlockSize.
	Fetch fetch.Options
	// ListTTL is how long a directory listing (names, sizes, versions) is trusted before
	// it is read again from the origin. Default 1 minute. Zero means the default; a
	// negative value disables listing caching (every lookup asks the origin).
	ListTTL time.Duration
	// Logger receives the engine's logs. nil means slog.Default().
	Logger *slog.Logger
}

// DefaultListTTL is long enough that a media scanner walking a tree asks the origin once
// per directory, short enough that new files appear within a minute.
const DefaultListTTL = time.Minute

// DefaultOptions returns working defaults: cache in the user cache directory, 20 GiB,
// 64 MiB maximum read-ahead.
func DefaultOptions() Options {
	c := cache.DefaultOptions()
	c.Dir = DefaultCacheDir()
	ra := readahead.DefaultConfig()
	ra.BlockSize = c.BlockSize
	f := fetch.DefaultOptions()
	f.BlockSize = c.BlockSize
	return Options{Cache: c, ReadAhead: ra, Fetch: f, ListTTL: DefaultListTTL}
}

// DefaultCacheDir is playhead's directory under the user cache directory
// ($XDG_CACHE_HOME or ~/.cache), or under the temporary directory when there is none.
func DefaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "playhead")
	}
	return filepath.Join(os.TempDir(), "playhead-cache")
}

// Validate checks every part of the options.
func (o Options) Validate() error {
	if err := o.Cache.Validate(); err != nil {
		return err
	}
	ra := o.ReadAhead
	ra.BlockSize = o.Cache.BlockSize
	if err := ra.Validate(); err != nil {
		return err
	}
	fo := o.Fetch
	fo.BlockSize = o.Cache.BlockSize
	return fo.Validate()
}

// FS is a read-only view of a source with caching and read-ahead. Safe for concurrent use.
type FS struct {
	src     source.Source
	cache   *cache.Cache
	fetcher *fetch.Fetcher
	probes  *readahead.Probes // what header parsers read of each kind of file (fileKind)
	opts    Options
	log     *slog.Logger
	debug   bool // log every read's decision; checked first so the hot path skips the call

	mu         sync.Mutex
	dirs       *lru.Cache[string, *dirListing] // listings by directory (listing.go); stats guarded by mu
	refreshing map[string]bool                 // directories a background listing is on its way for; guarded by mu

	// bg is the background listings' context, cancelled by Close, which waits for them
	// (bgWait) before it closes the source.
	bg       context.Context
	bgCancel context.CancelFunc
	bgWait   sync.WaitGroup

	onChange atomic.Pointer[func(path string)] // see OnChange

	times dirTimes // directories' times to show (times.go)
}

// dirListing is one cached listing. entries is never modified once stored (readers
// iterate it without the lock); sizes the listing lacked are kept in stats.
type dirListing struct {
	entries map[string]source.Entry
	stats   map[string]source.Entry // by name: Stat answers for entries listed without size; guarded by FS.mu
	expires time.Time               // zero once invalidated: kept only to compare with the next listing
}

// New opens the block cache and returns a FS over src. The FS owns src from then on
// (see Close).
func New(src source.Source, opts Options) (*FS, error) {
	if opts.Cache.Dir == "" {
		opts.Cache.Dir = DefaultCacheDir()
	}
	if opts.ListTTL == 0 {
		opts.ListTTL = DefaultListTTL
	}
	opts.ReadAhead.BlockSize = opts.Cache.BlockSize
	opts.Fetch.BlockSize = opts.Cache.BlockSize
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.Cache.Logger == nil {
		opts.Cache.Logger = log
	}
	c, err := cache.Open(opts.Cache)
	if err != nil {
		return nil, fmt.Errorf("playhead: cannot open cache in %s: %w", opts.Cache.Dir, err)
	}
	fs := &FS{src: src, cache: c, opts: opts, log: log, debug: log.Enabled(context.Background(), slog.LevelDebug),
		refreshing: map[string]bool{}}
	fs.bg, fs.bgCancel = context.WithCancel(context.Background())
	fs.dirs, _ = lru.New[string, *dirListing](maxDirs) // fails only for a size <= 0
	fo := opts.Fetch
	if fo.MaxLead == 0 {
		fo.MaxLead = opts.ReadAhead.MaxWindow // --read-ahead bounds the time-earned lead too
	}
	user := fo.OnChange
	fo.OnChange = func(p string) {
		fs.invalidate(p) // before a File of the new version can start (fetch.Options.OnChange)
		if user != nil {
			user(p)
		}
		// The edge's hook calls into the kernel, which waits for reads of the file's
		// pages in flight; those may wait on the fetcher.
		if h := fs.onChange.Load(); h != nil {
			go (*h)(p)
		}
	}
	fs.fetcher = fetch.New(src, c, fo, log)
	fs.probes = readahead.NewProbes(opts.ReadAhead)
	return fs, nil
}

// Close waits for cache writes in progress, closes the block cache, and closes the
// source if it has a Close method: the FS owns the source given to New. Open files must
// be closed first; reads after Close fail.
func (fs *FS) Close() error {
	// Cancelled under mu, where listingAged starts a background listing only while bg
	// is live: no listing starts (bgWait.Add) once Wait may have begun.
	fs.mu.Lock()
	fs.bgCancel()
	fs.mu.Unlock()
	fs.bgWait.Wait()
	fs.fetcher.Close()
	// Without this an HTTP source's keep-alive connections (and the goroutines serving
	// them) outlive the FS until the origin or the idle timeout closes them.
	var serr error
	if c, ok := fs.src.(io.Closer); ok {
		serr = c.Close()
	}
	return errors.Join(fs.cache.Close(), serr)
}

// Logger returns the logger the FS writes to.
func (fs *FS) Logger() *slog.Logger { return fs.log }

// Source returns the source the FS reads.
func (fs *FS) Source() source.Source { return fs.src }

// Options returns the options in force.
func (fs *FS) Options() Options { return fs.opts }

// FetchStats returns the fetch scheduler's counters.
func (fs *FS) FetchStats() fetch.Stats { return fs.fetcher.Stats() }

// CacheStats returns the block cache's counters.
func (fs *FS) CacheStats() cache.Stats { return fs.cache.Stats() }

// Clean turns a user path into the source's form: slash separated, no leading slash, ""
// for the root. It rejects paths that climb out of the root.
func Clean(p string) (string, error) {
	p = path.Clean("/" + p)
	if strings.Contains(p, "\x00") {
		return "", fmt.Errorf("bad path %q", p)
	}
	return strings.TrimPrefix(p, "/"), nil
}

// ReadDir returns the entries of the directory at p, sorted by name.
func (fs *FS) ReadDir(ctx context.Context, p string) ([]source.Entry, error) {
	p, err := Clean(p)
	if err != nil {
		return nil, err
	}
	l, err := fs.listing(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]source.Entry, 0, len(l))
	for _, e := range l {
		if e.IsDir {
			e = fs.withDirTime(path.Join(p, e.Name), e)
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Stat describes the file or directory at p. When the listing did not give a file's
// size, the origin is asked once and the answer kept with the listing; a size the origin
// will not tell stays -1, and Open refuses that file (ErrUnknownSize).
func (fs *FS) Stat(ctx context.Context, p string) (source.Entry, error) {
	return fs.stat(ctx, p, false)
}

// stat is Stat; with stale, an expired listing of p's directory answers at once while
// a fresh one is fetched in the background (see listingAged).
func (fs *FS) stat(ctx context.Context, p string, stale bool) (source.Entry, error) {
	p, err := Clean(p)
	if err != nil {
		return source.Entry{}, err
	}
	if p == "" {
		return fs.rootEntry(ctx), nil
	}
	dir, name := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	l, err := fs.listingAged(ctx, dir, stale)
	if err != nil {
		return source.Entry{}, err
	}
	e, ok := l[name]
	if !ok {
		return source.Entry{}, &source.PathError{Op: "stat", Path: p, Off: -1, Err: source.ErrNotFound}
	}
	if e.IsDir {
		return fs.withDirTime(p, e), nil
	}
	if e.Version.Size >= 0 {
		return e, nil
	}
	fs.mu.Lock()
	d, _ := fs.dirs.Peek(dir)
	if d != nil {
		if st, ok := d.stats[name]; ok {
			fs.mu.Unlock()
			return st, nil
		}
	}
	fs.mu.Unlock()
	st, err := fs.src.Stat(ctx, p)
	if err != nil {
		return source.Entry{}, err
	}
	st.Name = name
	st.ModTime = e.ModTime // a time the listing gave is shown before and after the HEAD alike
	if d != nil {
		fs.mu.Lock()
		if d.stats == nil {
			d.stats = map[string]source.Entry{}
		}
		d.stats[name] = st // forgotten with the listing, so a size is as fresh as its listing
		fs.mu.Unlock()
	}
	return st, nil
}

// Open opens the file at p for reading. The version opened is the origin's current
// one: a version whose cached blocks or kernel pages the origin has not vouched for
// within the listing TTL is checked first (one HEAD), and a version found changed is
// dropped and the new one opened, so a fresh open never fails because a cache holds an
// older object.
func (fs *FS) Open(ctx context.Context, p string) (*File, error) {
	return fs.open(ctx, p, nil)
}

// confirmAge is how long an origin's word on a version lasts for an open: the listing
// TTL, so a file opened again later is checked again (one HEAD) before its cached blocks
// or kernel pages are trusted. An exact open (a peer's request) is not checked by age:
// the asking node names the version it opened and checked itself, and the peer server
// serves only that version (it compares it with the File's, and again with the ETag
// the first read learns), so the owner's check would only add an origin round trip to
// every peer request of a file its owner has held for longer than the TTL. Blocks from
// an earlier run are still checked once (Confirm's first check), as for any open.
func (fs *FS) confirmAge(exact *readahead.Range) time.Duration {
	if exact != nil {
		return math.MaxInt64
	}
	return max(fs.opts.ListTTL, 0)
}

// OpenExact opens the file at p, as Open does, to read the range r (Len -1: to the end)
// and fetch nothing else: a read of the File claims the missing blocks from its offset
// to r's end, so the first read asks the origin for the whole range on one range
// request and later reads wait on it, and no read fetches a block outside r and its
// own: no read-ahead, no tail. The peer tier's server reads a peer's range this way:
// the blocks past it are other nodes' to fetch (package peer).
func (fs *FS) OpenExact(ctx context.Context, p string, r source.Range) (*File, error) {
	if r.Off < 0 {
		return nil, &source.PathError{Op: "open", Path: p, Off: r.Off, Err: errors.New("negative offset")}
	}
	span := readahead.Range{Off: r.Off, End: r.End()}
	if r.Len < 0 {
		span.End = math.MaxInt64
	}
	return fs.open(ctx, p, &span)
}

// open opens the file at p; exact, when not nil, is the range an OpenExact File reads.
func (fs *FS) open(ctx context.Context, p string, exact *readahead.Range) (*File, error) {
	p, err := Clean(p)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		// An exact open (a peer's request) may take its version from an expired listing:
		// the asking node names the version it opened, and the peer server serves that
		// one only (a mismatch is a 409, and the asker reads the origin), so waiting a
		// round trip for the listing would only delay each peer request once the listing
		// TTL has passed. A fresh listing is fetched in the background meanwhile.
		e, err := fs.stat(ctx, p, exact != nil)
		if err != nil {
			return nil, err
		}
		if e.IsDir {
			return nil, &source.PathError{Op: "open", Path: p, Off: -1, Err: errors.New("is a directory")}
		}
		if e.Version.Size < 0 {
			return nil, fs.refuseUnknownSize(p)
		}
		fl := fs.fetcher.Open(p, e.Version)
		err = fl.Confirm(ctx, fs.confirmAge(exact))
		if err == nil {
			f := &File{fs: fs, path: p, handle: fs.fetcher.NewHandle(), exact: exact}
			if exact == nil {
				f.policy = readahead.New(fs.opts.ReadAhead, e.Version.Size)
				f.policy.SetEnds(fs.probes.Ends(fileKind(p)))
			}
			f.fl.Store(fl)
			f.entry.Store(&e)
			return f, nil
		}
		fl.Release()
		// The listing that named this version is stale too: the next Stat reads it
		// again. An origin that keeps changing the object gets a bounded number of tries.
		fs.invalidate(p)
		if !errors.Is(err, source.ErrChanged) || attempt == maxOpenAttempts {
			return nil, err
		}
		fs.log.Info("object changed at origin since it was cached; opening the new version", "path", p)
	}
}

// fileKind is the kind of file at p whose header parsers read alike (readahead.Probes):
// its name's extension, in lower case.
func fileKind(p string) string { return strings.ToLower(path.Ext(p)) }

// maxOpenAttempts bounds how often Open follows an object that changes under it.
const maxOpenAttempts = 3

// OnChange sets a hook called (on its own goroutine) with the path of every object found
// changed or gone at the origin after playhead had cached or served it: the FUSE edge
// drops the kernel's pages and attributes there.
func (fs *FS) OnChange(h func(path string)) { fs.onChange.Store(&h) }
