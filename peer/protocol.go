package peer

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/playhead/playhead/source"
)

// BlockPath is the peer endpoint that serves a byte range of an object version.
const BlockPath = "/v1/block"

// MembersPath is the peer endpoint that answers the node's view of the cluster as JSON
// (peerserve.MembersView), for `playhead peers`.
const MembersPath = "/v1/members"

// Status codes of the protocol beyond 200, and what the client does on each: all of
// them send the run to the origin.
const (
	StatusNotThisVersion = http.StatusConflict           // 409: the owner reads another version
	StatusNotOwner       = http.StatusMisdirectedRequest // 421: the block is not the server's by its own ring
)

// StatusReceived is the informational status (102) an owner sends as soon as it has
// verified a block request and found the range its own, before it opens the file
// (which may confirm the version with its origin) and reads it (which may fetch it
// from its origin): the reader then knows the owner alive and working on the request,
// and waits for it longer than for a peer that has not said a word (hedge.go).
const StatusReceived = http.StatusProcessing

// Response headers carrying the version of the bytes served. A field unknown to the
// server is absent.
const (
	HeaderSize  = "X-Playhead-Size"
	HeaderMtime = "X-Playhead-Mtime" // unix nanoseconds
	HeaderETag  = "X-Playhead-Etag"
)

// BlockRequest is one range read asked of a peer. The version travels as its three
// fields rather than one name, so the owner checks every validator both sides know.
type BlockRequest struct {
	Source  string // Secret.SourceID of the source spec
	Path    string
	Off     int64
	Len     int64 // > 0: the client always knows the object's size and cuts at it
	Version source.Version
}

// Query encodes r as the request's query string.
func (r BlockRequest) Query() string {
	q := url.Values{}
	q.Set("src", r.Source)
	q.Set("path", r.Path)
	q.Set("off", strconv.FormatInt(r.Off, 10))
	q.Set("len", strconv.FormatInt(r.Len, 10))
	q.Set("size", strconv.FormatInt(r.Version.Size, 10))
	if !r.Version.ModTime.IsZero() {
		q.Set("mtime", strconv.FormatInt(r.Version.ModTime.UnixNano(), 10))
	}
	if r.Version.ETag != "" {
		q.Set("etag", r.Version.ETag)
	}
	return q.Encode()
}

// ErrBadRequest is wrapped by ParseBlockRequest's errors.
var ErrBadRequest = errors.New("bad peer block request")

// ParseBlockRequest decodes a request's query. The path is not checked here (ValidPath).
func ParseBlockRequest(q url.Values) (BlockRequest, error) {
	r := BlockRequest{Source: q.Get("src"), Path: q.Get("path")}
	var err error
	num := func(name string) int64 {
		n, perr := strconv.ParseInt(q.Get(name), 10, 64)
		if perr != nil && err == nil {
			err = fmt.Errorf("%w: %s", ErrBadRequest, name)
		}
		return n
	}
	r.Off, r.Len, r.Version.Size = num("off"), num("len"), num("size")
	if q.Get("mtime") != "" {
		r.Version.ModTime = time.Unix(0, num("mtime")).UTC()
	}
	r.Version.ETag = q.Get("etag")
	if err == nil && (r.Off < 0 || r.Len <= 0 || r.Version.Size < 0 || r.Off > r.Version.Size || r.Len > r.Version.Size-r.Off) {
		err = fmt.Errorf("%w: range [%d, +%d) of a %d-byte object", ErrBadRequest, r.Off, r.Len, r.Version.Size)
	}
	return r, err
}

// ValidPath reports whether p names a file in a source's form (source.Source): slash
// separated, relative, no empty, "." or ".." element, no leading or trailing slash, not
// the root. Anything else names nothing, and a server must not read it.
func ValidPath(p string) bool {
	return p != "" && fs.ValidPath(p) && p != "." && !strings.ContainsAny(p, "\x00\\")
}

// SetVersion writes v into a response's headers.
func SetVersion(h http.Header, v source.Version) {
	h.Set(HeaderSize, strconv.FormatInt(v.Size, 10))
	if !v.ModTime.IsZero() {
		h.Set(HeaderMtime, strconv.FormatInt(v.ModTime.UnixNano(), 10))
	}
	if v.ETag != "" {
		h.Set(HeaderETag, v.ETag)
	}
}

// VersionOf reads the version a response's headers carry.
func VersionOf(h http.Header) (source.Version, error) {
	v := source.Version{Size: -1, ETag: h.Get(HeaderETag)}
	var err error
	if v.Size, err = strconv.ParseInt(h.Get(HeaderSize), 10, 64); err != nil {
		return v, fmt.Errorf("peer answer without a size: %w", err)
	}
	if m := h.Get(HeaderMtime); m != "" {
		ns, err := strconv.ParseInt(m, 10, 64)
		if err != nil {
			return v, fmt.Errorf("peer answer with a bad mtime: %w", err)
		}
		v.ModTime = time.Unix(0, ns).UTC()
	}
	return v, nil
}

// Agree reports whether a peer may serve bytes of version have to a reader that wants
// want: every validator known on both sides is equal (Version.Matches), the sizes are
// known and equal, and at least one strong validator is known on both sides (equal
// ETags that are not weak, or equal modification times), so two same-size objects
// that nothing tells apart are never taken for one.
func Agree(want, have source.Version) bool {
	if !want.Matches(have) || want.Size < 0 || want.Size != have.Size {
		return false
	}
	etags := want.ETag != "" && have.ETag != "" && !strings.HasPrefix(want.ETag, "W/")
	times := !want.ModTime.IsZero() && !have.ModTime.IsZero()
	return etags || times
}

// versionName is a version's part of a block key: the size-mtime CacheKey, which every
// node has from its listing. Not the ETag: a node learns it from its first range, so
// keys with it would move as nodes learn it and two nodes would pick different owners
// for one block. Two versions that share a CacheKey share owners, which is harmless:
// the owner checks the full version (Agree) before it serves a byte.
func versionName(v source.Version) string { return v.CacheKey() }
