// Package peerserve is the server half of the peer tier: an http.Handler that serves a
// byte range of an object version to the other nodes, read through this node's own
// vfs.FS, so the owner of a block fetches it from the origin once, keeps it in its
// cache, and serves every node that asks.
//
// Layering: cmd → peer/peerserve → vfs → fetch → source, and peerserve → peer (the
// protocol, the authentication, the ring). Package peer never imports it.
//
// Design notes and traps:
//   - Every request is authenticated first (peer.Verifier: HMAC, the target host the
//     signature names must be this node's peer address, clock skew, nonce);
//     a refusal is a 401 with no detail and is counted. Nothing of the request is
//     logged before it is verified.
//   - The server answers only for its source (the source ID is a keyed hash of the
//     spec), only for paths in the source's form (peer.ValidPath: no "..", absolute or
//     empty element), and only for ranges it owns end to end by its own ring (421
//     otherwise). The ownership check is what keeps a block to one peer hop: the
//     fetcher opens its ranges on a context of its own, so the FromPeer mark on the
//     read does not reach the node's peer.Source; but a block the node owns is read
//     from the origin by it.
//   - The version asked for must Agree with the version the node's FS opens (409
//     otherwise), so no node serves bytes of a version the reader did not open.
//   - A verified request for a range this node owns is answered 102
//     (peer.StatusReceived) at once, and the status and headers as soon as the version
//     check passes, before the first chunk is read (which may wait on this node's origin): the reader's
//     hedge then knows this node alive and working, so a cold owner is not given up on
//     while a dead one is (package peer, hedge.go). An error up to the headers is a
//     status the client acts on; after them, a cut body, which the client continues
//     from the origin. When the reader knows an ETag the open does not, the headers
//     wait for the first read, which learns it.
//   - GET peer.MembersPath answers this node's view of the cluster as JSON
//     (MembersView: each member's state and the bytes exchanged with it, the node's
//     totals), for `playhead peers`; signed like every request, since it names the
//     members' addresses. A block request carries its sender's member name, signed, so
//     the bytes served are counted per member.
//   - A peer's range is read exactly (vfs.FS.OpenExact): no read-ahead and no tail.
//     The blocks past it are other nodes' to fetch, and read-ahead here would claim
//     them, fetch them from the origin a second time, and could make this node wait on
//     the very node that asked (the wait cycle of peer's doc). The whole range is
//     claimed at the first read, so it comes from the origin on one range, in order.
package peerserve

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/playhead/playhead/fetch"
	"github.com/playhead/playhead/peer"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/vfs"
)

// File is an open file of the node, as vfs.File is.
type File interface {
	ReadAtContext(ctx context.Context, p []byte, off int64) (int, error)
	Version() source.Version
	Close() error
}

// Files opens the node's files.
type Files interface {
	// Open opens path for reading the range r (within the file) and fetching nothing
	// else: no read-ahead past it.
	Open(ctx context.Context, path string, r source.Range) (File, error)
}

var _ = (File)((*vfs.File)(nil))

// FromFS serves the files of fsys, each request's range read exactly (vfs.FS.OpenExact).
func FromFS(fsys *vfs.FS) Files { return fsFiles{fsys} }

type fsFiles struct{ fs *vfs.FS }

func (f fsFiles) Open(ctx context.Context, path string, r source.Range) (File, error) {
	vf, err := f.fs.OpenExact(ctx, path, r)
	if err != nil {
		return nil, err
	}
	// Pinned: a File that has returned nothing follows a changed object to its new
	// version (vfs.File.move); a peer's read must fail instead, so the version checked
	// is the version served.
	vf.Pin()
	return vf, nil
}

// Options configure a Handler.
type Options struct {
	SourceID string         // the ID of the source this node mounts (peer.Secret.SourceID)
	Verifier *peer.Verifier // checks every request
	Files    Files          // the node's files
	// Owns reports whether this node owns every block of [off, end) of path's version
	// (the node's peer.Source.Owns). nil: every block is this node's (a single server).
	Owns func(path string, v source.Version, off, end int64) bool
	// Tier is the node's peer.Source, whose view MembersPath answers. nil: 404 there.
	Tier   Tier
	Logger *slog.Logger // nil means slog.Default()
}

// Stats counts a Handler's answers. package metrics exports them (the playhead_peer_served_*
// and playhead_peer_unauthenticated_total series).
type Stats struct {
	Requests       int64 // every request
	Served, Bytes  int64 // ranges served (200) and their bytes
	Unauthorized   int64 // 401: missing, bad, stale or replayed signature
	Refused        int64 // 400, 403, 404, 405, 421: a request this node does not answer
	NotThisVersion int64 // 409
	Errors         int64 // 5xx and bodies cut by a read error
}

// Handler serves peer.BlockPath.
type Handler struct {
	o   Options
	log *slog.Logger

	requests, served, bytes, unauthorized, refused, conflicts, errs atomic.Int64
	byMember                                                        servedTable // bytes served to each member (members.go)
}

// chunk is how much is read from the FS per copy: one default block, so each read is
// one block of the node's cache.
const chunk = peer.DefaultBlockSize

var bufPool = sync.Pool{New: func() any { b := make([]byte, chunk); return &b }}

// New returns a Handler.
func New(o Options) (*Handler, error) {
	if o.SourceID == "" || o.Verifier == nil || o.Files == nil {
		return nil, errors.New("peerserve: SourceID, Verifier and Files are required")
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Handler{o: o, log: log}, nil
}

// Stats returns the counters.
func (h *Handler) Stats() Stats {
	return Stats{Requests: h.requests.Load(), Served: h.served.Load(), Bytes: h.bytes.Load(),
		Unauthorized: h.unauthorized.Load(), Refused: h.refused.Load(),
		NotThisVersion: h.conflicts.Load(), Errors: h.errs.Load()}
}

// refuse answers code with its status text only: a peer needs no more, and a stranger
// should learn nothing.
func (h *Handler) refuse(w http.ResponseWriter, code int) {
	switch {
	case code == http.StatusUnauthorized:
		h.unauthorized.Add(1)
	case code == peer.StatusNotThisVersion:
		h.conflicts.Add(1)
	case code >= 500:
		h.errs.Add(1)
	default:
		h.refused.Add(1)
	}
	http.Error(w, http.StatusText(code), code)
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.requests.Add(1)
	if err := h.o.Verifier.Verify(r); err != nil {
		h.log.Debug("peer request refused", "remote", r.RemoteAddr, "err", err)
		h.refuse(w, http.StatusUnauthorized)
		return
	}
	if r.URL.Path != peer.BlockPath && (r.URL.Path != peer.MembersPath || h.o.Tier == nil) {
		h.refuse(w, http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet {
		h.refuse(w, http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == peer.MembersPath {
		h.members(w)
		return
	}
	req, err := peer.ParseBlockRequest(r.URL.Query())
	switch {
	case err != nil:
		h.refuse(w, http.StatusBadRequest)
		return
	case req.Source != h.o.SourceID:
		h.refuse(w, http.StatusNotFound)
		return
	case !peer.ValidPath(req.Path):
		h.refuse(w, http.StatusForbidden)
		return
	case h.o.Owns != nil && !h.o.Owns(req.Path, req.Version, req.Off, req.Off+req.Len):
		h.refuse(w, peer.StatusNotOwner)
		return
	}
	w.WriteHeader(peer.StatusReceived)
	h.serve(w, peer.FromPeer(r.Context()), req, h.byMember.get(r.Header.Get(peer.HeaderFrom)))
}

// serve opens the file, checks the version and streams the range, counting its bytes
// in sent too (the asking member's count).
func (h *Handler) serve(w http.ResponseWriter, ctx context.Context, req peer.BlockRequest, sent *atomic.Int64) {
	f, err := h.o.Files.Open(ctx, req.Path, source.Range{Off: req.Off, Len: req.Len})
	if err != nil {
		h.refuse(w, statusOf(err))
		return
	}
	defer f.Close()
	v := f.Version()
	if !peer.Agree(req.Version, v) {
		h.refuse(w, peer.StatusNotThisVersion)
		return
	}
	// The open's version decides the request unless the reader knows an ETag the open
	// does not (a listing without ETags): then only the first read, which learns it,
	// can tell a same-size replacement, and the headers wait for it.
	answered := false
	if req.Version.ETag == "" || v.ETag != "" {
		h.answer(w, v, req.Len)
		answered = true
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	off, end := req.Off, req.Off+req.Len
	for off < end {
		want := int(min(int64(len(buf)), end-off))
		c, err := readPiece(ctx, f, buf[:want], off)
		n := c.n
		if n < want && off+int64(n) < end && err == nil {
			err = io.ErrUnexpectedEOF
		}
		if !answered {
			if err != nil && !(err == io.EOF && off+int64(n) == end) {
				c.release()
				h.refuse(w, statusOf(err))
				return
			}
			// Checked again with what the read learned: a reader that knows the ETag is
			// never served a same-size replacement the open could not tell.
			if v = f.Version(); !peer.Agree(req.Version, v) || v.ETag != req.Version.ETag {
				c.release()
				h.refuse(w, peer.StatusNotThisVersion)
				return
			}
			h.answer(w, v, req.Len)
			answered = true
		}
		werr := c.writeTo(w)
		c.release()
		if werr != nil {
			return // the peer went away (hedged, or closed its body)
		}
		h.bytes.Add(int64(n))
		sent.Add(int64(n))
		off += int64(n)
		if err != nil && off < end {
			if ctx.Err() != nil {
				return // the asking node ended the request (it closed the run): no failure here
			}
			h.errs.Add(1) // the peer sees a cut body and continues from the origin
			h.log.Warn("peer read cut", "path", req.Path, "off", off, "err", err)
			return
		}
	}
}

// viewFile is a File that lends its bytes (vfs.File.ReadView): a piece then goes to the
// peer from the node's block buffers, without a copy into the handler's buffer.
type viewFile interface {
	ReadView(ctx context.Context, off int64, n int) (fetch.View, error)
}

var _ = (viewFile)((*vfs.File)(nil))

// piece is one read of a range: its bytes, and the view that holds them until release.
type piece struct {
	data [][]byte
	n    int
	view *fetch.View // nil when the bytes are in the handler's buffer
}

// readPiece reads len(buf) bytes at off: a view of f's buffers when f lends them, else
// into buf. The piece is short only at the end of the file or with an error, as
// ReadAtContext is.
func readPiece(ctx context.Context, f File, buf []byte, off int64) (piece, error) {
	if vf, ok := f.(viewFile); ok {
		v, err := vf.ReadView(ctx, off, len(buf))
		return piece{data: v.Slices, n: v.Len(), view: &v}, err
	}
	n, err := f.ReadAtContext(ctx, buf, off)
	return piece{data: [][]byte{buf[:n]}, n: n}, err
}

func (c piece) writeTo(w io.Writer) error {
	for _, s := range c.data {
		if _, err := w.Write(s); err != nil {
			return err
		}
	}
	return nil
}

// release returns a view's buffers; the caller must not touch data after it.
func (c piece) release() {
	if c.view != nil {
		c.view.Release()
	}
}

// answer sends the status and headers of a range of n bytes of version v, at once:
// the reader's hedge then knows this node alive while it fetches the range from its
// origin (peer's hedger.bodyBudget). A read that fails after it cuts the body, which
// the reader continues from the origin.
func (h *Handler) answer(w http.ResponseWriter, v source.Version, n int64) {
	h.served.Add(1)
	peer.SetVersion(w.Header(), v)
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// statusOf maps a read error to the status the client acts on: another version or a
// missing object is 409 (the reader goes to the origin, which says what happened).
func statusOf(err error) int {
	switch {
	case errors.Is(err, source.ErrChanged), errors.Is(err, source.ErrNotFound):
		return peer.StatusNotThisVersion
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable
	}
	return http.StatusBadGateway
}
