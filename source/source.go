// Package source defines how playhead reaches an origin: one small interface that every
// backend (local directory, HTTP server, in-memory fake) implements, and the errors the
// upper layers act on.
//
// Design notes and traps:
//   - A Source is stateless from the caller's point of view and safe for concurrent use.
//     Connection reuse is the backend's business (an HTTP source keeps idle keep-alive
//     connections); the fetcher only decides how many ranges it opens and how far it reads.
//   - OpenRange returns a body that the caller may stop reading at any time. Closing a body
//     early is how a fetch is cancelled; for HTTP it usually costs the connection.
//   - Every range is tied to a Version. A backend that sees a different version of the
//     object than the one asked for returns ErrChanged instead of bytes, so old and new
//     bytes of one file are never mixed in one cache entry.
//   - Errors are wrapped with the path and offset; ErrNotFound, ErrChanged and ErrPermission
//     are permanent, everything else is treated as transient and retried by the fetcher.
//   - The origin is a set of files: a directory exists while some file lies under it, as
//     an object store's prefix does. The contract holds for every backend alike; package
//     sourcetest is its conformance suite, and each backend's tests run it.
package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Errors a backend reports. Use errors.Is to test for them; backends wrap them with context.
var (
	// ErrNotFound: the object or directory does not exist at the origin.
	ErrNotFound = errors.New("not found at origin")
	// ErrChanged: the object at the origin is no longer the version that was asked for.
	ErrChanged = errors.New("object changed at origin")
	// ErrPermission: the origin refuses access.
	ErrPermission = errors.New("permission denied by origin")
	// ErrNotDir: a directory listing was asked of something that is not a directory.
	ErrNotDir = errors.New("not a directory")
)

// IsPermanent reports whether retrying err cannot help.
func IsPermanent(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrChanged) ||
		errors.Is(err, ErrPermission) || errors.Is(err, ErrNotDir) ||
		errors.Is(err, context.Canceled)
}

// Version identifies one version of an object. Zero fields are unknown. Two versions match
// when every field known on both sides is equal (see Matches).
type Version struct {
	Size    int64     // bytes; -1 when unknown
	ModTime time.Time // the origin's modification time (Last-Modified for HTTP)
	ETag    string    // strong or weak entity tag as sent by the origin, quotes included
}

// Matches reports whether v and o can be the same version: each field known on both sides
// must be equal. Sizes are always compared when both are known (>= 0).
func (v Version) Matches(o Version) bool {
	if v.Size >= 0 && o.Size >= 0 && v.Size != o.Size {
		return false
	}
	if !v.ModTime.IsZero() && !o.ModTime.IsZero() && !v.ModTime.Equal(o.ModTime) {
		return false
	}
	if v.ETag != "" && o.ETag != "" && v.ETag != o.ETag {
		return false
	}
	return true
}

// CacheKey is the part of the version that is known before any byte is fetched (size and
// modification time, as a listing reports them). Cached blocks are filed under it, so a
// restart finds them without asking the origin, and any change of size or time starts a
// fresh entry. The ETag, learned from the first range, is checked against the entry later.
func (v Version) CacheKey() string {
	return strconv.FormatInt(v.Size, 10) + "-" + strconv.FormatInt(v.ModTime.Unix(), 10)
}

func (v Version) String() string {
	return fmt.Sprintf("size=%d mtime=%s etag=%s", v.Size, v.ModTime.UTC().Format(time.RFC3339), v.ETag)
}

// Entry describes one file or directory.
type Entry struct {
	Name  string // base name, never empty, never containing '/'
	IsDir bool
	// Version of a file. Size is -1 when the listing did not say (call Stat for it).
	Version Version
	// ModTime is the modification time to show, when it is known only to the listing's
	// precision (an HTML listing says "24-Nov-2026 11:54"); zero when the listing gave
	// none, or gave it exactly in Version.ModTime. It is never compared with the origin:
	// Version.ModTime is the validator, and a time rounded to the minute would never
	// match Last-Modified. A directory's time lives here too.
	ModTime time.Time
}

// Time is the modification time to show for e: ModTime when the listing gave one, else
// the version's (an exact listing time, or Last-Modified once the origin answered a HEAD
// or GET); zero when neither is known.
func (e Entry) Time() time.Time {
	if !e.ModTime.IsZero() {
		return e.ModTime
	}
	return e.Version.ModTime
}

// Range is a byte range: [Off, Off+Len). Len < 0 means "to the end of the object".
type Range struct {
	Off int64
	Len int64
}

// End is the first byte past the range, or -1 for an open-ended range.
func (r Range) End() int64 {
	if r.Len < 0 {
		return -1
	}
	return r.Off + r.Len
}

// Body is an open range of an object.
//
// Read follows io.Reader: it returns the range's bytes in order, then io.EOF once the
// range (or the object) ends. A body that ends before the range does without error
// reports io.ErrUnexpectedEOF. Read is not safe for concurrent use; Close may be called
// from another goroutine to abort a blocked Read, and may be called more than once; a
// Read after Close fails. A body belongs to the ctx given to OpenRange: once that ctx is
// done, Read fails. A body serves the bytes of the version it opened, or fails, even when
// the object is replaced at the origin meanwhile (a replacement that is a new object, as
// a rename or an upload makes; a local file rewritten in place is beyond any backend).
type Body interface {
	io.ReadCloser
	// Version is the version the origin served (fields it did not send are zero).
	Version() Version
}

// Source is an origin of files. Paths are slash-separated, relative to the source's root,
// without a leading slash; "" is the root directory. A path not in that form (a leading or
// trailing slash, an empty, "." or ".." element) names nothing: ErrNotFound, never
// another file. All methods are safe for concurrent use and return promptly when ctx is
// done. Their errors are (or wrap) a *PathError naming the path as given.
type Source interface {
	// Stat describes path. It returns an error wrapping ErrNotFound if there is none.
	// Stat("") is the root directory, named ".". A file's version has its size and a
	// validator (a modification time or an ETag) that tells a same-size replacement apart.
	Stat(ctx context.Context, path string) (Entry, error)
	// List returns the entries of the directory at path, in no particular order. For a
	// missing directory it returns an error wrapping ErrNotFound (a prefix of names, such
	// as "di" beside "dir/" and "dir.bin", is no directory). For a file it returns
	// ErrNotDir, or ErrNotFound where the origin cannot tell a file from a missing
	// directory without another request (an HTTP server's 404 for "file/", an object
	// store's empty prefix listing): both are permanent, and callers only list what they
	// saw as directories.
	List(ctx context.Context, path string) ([]Entry, error)
	// OpenRange opens r of the file at path. want is the version the caller expects; when
	// the origin's object does not match it (Version.Matches) the backend returns an error
	// wrapping ErrChanged and no bytes. A zero want (Size -1) accepts any version.
	//
	// At the edges: a range running past the end of the object is cut there; a range
	// starting at or past the end is an empty body (Read gives io.EOF at once), not an
	// error, when the version matches. A zero-length range (Len 0) is an empty body
	// too, which the backend may give without asking the origin: it need not report a
	// missing or changed object. A missing object is ErrNotFound; asked with a wanted
	// version (a file deleted since it was seen) ErrNotFound or ErrChanged, as the origin
	// checks the condition or the existence first: both are permanent. A directory is not
	// a file: ErrNotFound.
	OpenRange(ctx context.Context, path string, r Range, want Version) (Body, error)
	// String names the source for logs and cache keys (for example the base URL).
	String() string
}

// AnyVersion accepts any version of an object.
var AnyVersion = Version{Size: -1}

// PathError carries the operation, path and offset of a failure.
type PathError struct {
	Op   string
	Path string
	Off  int64 // -1 when not about a range
	Err  error
}

func (e *PathError) Error() string {
	if e.Off >= 0 {
		return fmt.Sprintf("%s %q at offset %d: %v", e.Op, e.Path, e.Off, e.Err)
	}
	return fmt.Sprintf("%s %q: %v", e.Op, e.Path, e.Err)
}

func (e *PathError) Unwrap() error { return e.Err }

// Same reports whether v and o are known to be the same version: equal sizes and an
// equal strong validator, the ETag where either side has one (it must then be on both
// and not weak), else an exact modification time on both. Unlike Matches, an unknown field never vouches: a listing
// that gives only sizes cannot tell a same-size replacement apart. A weak ETag (W/)
// promises equivalent content, not equal bytes, so it never vouches either.
func (v Version) Same(o Version) bool {
	if v.Size < 0 || v.Size != o.Size {
		return false
	}
	if v.ETag != "" || o.ETag != "" {
		// An origin that gives ETags has them on both sides or nothing vouches: the
		// time alone cannot tell a replacement within the same second.
		return v.ETag == o.ETag && !strings.HasPrefix(v.ETag, "W/")
	}
	return !v.ModTime.IsZero() && v.ModTime.Equal(o.ModTime)
}
