// Package blobsrc reads objects from S3-compatible storage, Azure Blob Storage and Google
// Cloud Storage as a source.Source, through gocloud.dev/blob over each cloud's own SDK.
// Range reads, retries with backoff (503 SlowDown, 429, 500), credential chains and their
// refresh are the SDKs'; this package adds what the engine needs on top:
//
//   - Versions. Every ranged GET is conditional on the version the caller wants (If-Match
//     on the ETag for S3 and Azure, the generation for GCS, both carried in
//     source.Version.ETag), so a read of a replaced object fails with source.ErrChanged
//     instead of returning bytes of another version. A read that wants no particular
//     version reports the one it got, and the caller pins later reads to it.
//   - Directories. Key prefixes ending in "/" are directories, as rclone and
//     mountpoint-s3 show them. Listings use the delimiter and are paginated.
//   - Names. A key that cannot be a file name (an empty, "." or ".." segment, a NUL, a
//     segment over 255 bytes, or a file key that is also a prefix) is skipped with one
//     warning per key for the life of the source, and never reaches the filesystem.
//   - Times. Times are whole seconds: listings give milliseconds and HEAD answers
//     seconds, and the two must compare equal.
//
// Azure objects are read and stat'ed through the Azure SDK itself (azure.go): gocloud.dev
// escapes '#', '%' and '?' in keys and so cannot find objects other tools wrote under
// such names.
//
// Traps: gocloud.dev maps a wrong S3 secret (SignatureDoesNotMatch) to Unknown and a GCS
// 403 to NotFound; errors here are mapped from the HTTP status first (status.go), so a
// refused credential is ErrPermission on every cloud. Stat of a key that is both an
// object and a prefix answers the object; List shows the directory.
package blobsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/internal/spare"
)

// Kind is the cloud a source talks to; it picks the dialect of versions and conditions.
type Kind string

const (
	S3    Kind = "s3"
	Azure Kind = "azblob"
	GCS   Kind = "gs"
)

// defaultTimeout bounds metadata requests and the wait for an answer when the options
// give no timeout.
const defaultTimeout = 30 * time.Second

// pageSize is the listing page: S3's maximum, so a folder of 10,000 objects is 10 calls.
const pageSize = 1000

// Source is a bucket (or a prefix of one) as a source.Source.
type Source struct {
	bucket  *blob.Bucket
	kind    Kind
	name    string // the URL given, for logs and cache keys: "s3://bucket/prefix"
	prefix  string // key prefix of the root, "" or ending in "/"
	timeout time.Duration
	log     *slog.Logger
	spares  *spare.Conns // nil unless Open built the transport
	// az reads Azure objects directly through the Azure SDK (azure.go); nil elsewhere.
	az *container.Client

	warnMu sync.Mutex
	warned map[string]bool // keys already warned about; bounded by maxWarned
}

// maxWarned bounds the set of keys warned about, so a bucket of millions of bad keys
// cannot grow memory; past it a key may be warned about again on a later listing.
const maxWarned = 1 << 14

// NewFromBucket returns a source reading b under prefix. name is the URL it is known by
// (logs, cache keys, metrics); timeout bounds each metadata request and the wait for a
// range's first byte (zero: 30 s); log receives the warnings about skipped keys (nil:
// slog.Default()). The source owns b: Close closes it.
func NewFromBucket(b *blob.Bucket, kind Kind, name, prefix string, timeout time.Duration, log *slog.Logger) *Source {
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	if log == nil {
		log = slog.Default()
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return &Source{bucket: b, kind: kind, name: name, prefix: prefix, timeout: timeout, log: log, warned: map[string]bool{}}
}

// String implements source.Source.
func (s *Source) String() string { return s.name }

// Close releases the bucket's clients.
func (s *Source) Close() error {
	if s.spares != nil {
		s.spares.Close()
	}
	return s.bucket.Close()
}

// key is the object key of a source path.
func (s *Source) key(p string) string { return s.prefix + p }

// Stat implements source.Source: the object's attributes, else a listing of the prefix
// with one entry to tell a directory from nothing.
func (s *Source) Stat(ctx context.Context, p string) (source.Entry, error) {
	fail := func(err error) (source.Entry, error) {
		return source.Entry{}, &source.PathError{Op: "stat", Path: p, Off: -1, Err: err}
	}
	if p == "" {
		return source.Entry{Name: ".", IsDir: true, Version: source.AnyVersion}, nil
	}
	if !validPath(p) {
		return fail(source.ErrNotFound)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	name := p[strings.LastIndexByte(p, '/')+1:]
	v, err := s.attributes(ctx, s.key(p))
	if err == nil {
		return source.Entry{Name: name, Version: v}, nil
	}
	if err = s.mapErr(err); !errors.Is(err, source.ErrNotFound) {
		return fail(err)
	}
	objs, _, err := s.bucket.ListPage(ctx, blob.FirstPageToken, 1, &blob.ListOptions{Prefix: s.key(p) + "/"})
	if err != nil {
		return fail(s.mapErr(err))
	}
	if len(objs) == 0 {
		return fail(source.ErrNotFound)
	}
	return source.Entry{Name: name, IsDir: true, Version: source.AnyVersion}, nil
}

// List implements source.Source: every page of the prefix's listing with the delimiter.
// An empty listing is the root (an empty bucket) or, anywhere else, no directory: then
// the path is a file (ErrNotDir) or nothing (ErrNotFound).
func (s *Source) List(ctx context.Context, p string) ([]source.Entry, error) {
	fail := func(err error) ([]source.Entry, error) {
		return nil, &source.PathError{Op: "list", Path: p, Off: -1, Err: err}
	}
	if p != "" && !validPath(p) {
		return fail(source.ErrNotFound)
	}
	dirPrefix := s.prefix
	if p != "" {
		dirPrefix = s.key(p) + "/"
	}
	var (
		entries []source.Entry
		dirs    = map[string]bool{}
		files   = map[string]int{} // name → index in entries
		seen    bool
		token   = blob.FirstPageToken
	)
	opts := &blob.ListOptions{Prefix: dirPrefix, Delimiter: "/"}
	for {
		ctx, cancel := context.WithTimeout(ctx, s.timeout)
		objs, next, err := s.bucket.ListPage(ctx, token, pageSize, opts)
		cancel()
		if err != nil {
			return fail(s.mapErr(err))
		}
		for _, o := range objs {
			seen = true
			name := strings.TrimSuffix(strings.TrimPrefix(o.Key, dirPrefix), "/")
			if name == "" && !o.IsDir {
				continue // the folder's own marker object ("dir/"), as consoles create
			}
			if !validName(name) {
				s.warn(o.Key, "not a valid file name")
				continue
			}
			if o.IsDir {
				if !dirs[name] { // a prefix may come again on a later page (GCS does)
					dirs[name] = true
					entries = append(entries, source.Entry{Name: name, IsDir: true, Version: source.AnyVersion})
				}
				continue
			}
			files[name] = len(entries)
			entries = append(entries, source.Entry{Name: name, Version: s.listVersion(o)})
		}
		if len(next) == 0 {
			break
		}
		token = next
	}
	if !seen && p != "" {
		if _, err := s.Stat(ctx, p); err == nil {
			return fail(source.ErrNotDir)
		}
		return fail(source.ErrNotFound)
	}
	return s.dropFileDirs(entries, dirs, files, dirPrefix), nil
}

// dropFileDirs removes the files whose name is also a directory of the same listing
// (keys "a" and "a/b"): a file system cannot show both, and the directory holds more.
func (s *Source) dropFileDirs(entries []source.Entry, dirs map[string]bool, files map[string]int, dirPrefix string) []source.Entry {
	clash := false
	for name := range files {
		if dirs[name] {
			clash = true
			s.warn(dirPrefix+name, "is both an object and a prefix; showing the directory")
		}
	}
	if !clash {
		return entries
	}
	out := entries[:0]
	for _, e := range entries {
		if e.IsDir || !dirs[e.Name] {
			out = append(out, e)
		}
	}
	return out
}

// warn logs once per key why it is not shown.
func (s *Source) warn(key, why string) {
	s.warnMu.Lock()
	first := !s.warned[key]
	if first {
		if len(s.warned) >= maxWarned {
			clear(s.warned)
		}
		s.warned[key] = true
	}
	s.warnMu.Unlock()
	if first {
		s.log.Warn("blobsrc: skipping object key", "source", s.name, "key", fmt.Sprintf("%q", key), "reason", why)
	}
}

// validName reports whether a listed name can be one file name.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && len(name) <= 255 &&
		!strings.ContainsAny(name, "/\x00")
}

// validPath reports whether every segment of p is a valid name.
func validPath(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if !validName(seg) {
			return false
		}
	}
	return true
}

// OpenRange implements source.Source with one ranged GET, conditional on want's ETag or
// generation when it has one; without one, want's other fields are checked against the
// answer. A range starting at or past the end is an empty body.
func (s *Source) OpenRange(ctx context.Context, p string, r source.Range, want source.Version) (source.Body, error) {
	fail := func(err error) (source.Body, error) {
		return nil, &source.PathError{Op: "open", Path: p, Off: r.Off, Err: err}
	}
	if r.Off < 0 {
		return fail(errors.New("negative offset"))
	}
	if !validPath(p) {
		return fail(source.ErrNotFound)
	}
	n := r.Len
	if n < 0 {
		n = -1
	}
	rctx, done := s.startRange(ctx)
	rd, got, cancelReq, err := s.openReader(rctx, s.key(p), r.Off, n, want)
	s.answered()
	if err != nil {
		done()
		err = s.mapErr(err)
		if errors.Is(err, errPastEnd) {
			return s.emptyPastEnd(ctx, p, r, want)
		}
		return fail(err)
	}
	cancel := func(err error) { cancelReq(err); done() }
	if !want.Matches(got) {
		rd.Close()
		cancel(nil)
		return fail(fmt.Errorf("%w: origin has %v, want %v", source.ErrChanged, got, want))
	}
	left := max(got.Size-r.Off, 0)
	if r.Len >= 0 && r.Len < left {
		left = r.Len
	}
	return &body{rd: rd, cancel: cancel, ctx: ctx, version: got, left: left, path: p, off: r.Off}, nil
}

// openReader starts the GET, bounding the wait for its answer by the source's timeout:
// the SDKs wait for headers as long as ctx allows, and the request's context must live as
// long as its body: the caller calls cancel once done with the reader.
// It returns the body and the version the answer was of.
func (s *Source) openReader(ctx context.Context, key string, off, n int64, want source.Version) (io.ReadCloser, source.Version, context.CancelCauseFunc, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(s.timeout, func() {
		cancel(fmt.Errorf("no answer within %v: %w", s.timeout, context.DeadlineExceeded))
	})
	var (
		rd  io.ReadCloser
		got source.Version
		err error
	)
	if s.az != nil {
		rd, got, err = s.azOpen(ctx, key, off, n, want)
	} else {
		var br *blob.Reader
		br, err = s.bucket.NewRangeReader(ctx, key, off, n, &blob.ReaderOptions{BeforeRead: s.condition(want)})
		if err == nil {
			rd, got = br, s.readerVersion(br)
		}
	}
	if !timer.Stop() || err != nil {
		if err == nil {
			rd.Close()
			err = context.Cause(ctx)
		} else if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = fmt.Errorf("%w (%v)", cause, err)
		}
		cancel(nil)
		return nil, source.Version{}, nil, err
	}
	return rd, got, cancel, nil
}

// emptyPastEnd answers a range the origin refused as past the end (416): an empty body of
// the object's current version, or ErrChanged if that is not the version wanted.
func (s *Source) emptyPastEnd(ctx context.Context, p string, r source.Range, want source.Version) (source.Body, error) {
	e, err := s.Stat(ctx, p)
	if err != nil {
		return nil, &source.PathError{Op: "open", Path: p, Off: r.Off, Err: err}
	}
	if !want.Matches(e.Version) {
		return nil, &source.PathError{Op: "open", Path: p, Off: r.Off,
			Err: fmt.Errorf("%w: origin has %v, want %v", source.ErrChanged, e.Version, want)}
	}
	if r.Off < e.Version.Size {
		return nil, &source.PathError{Op: "open", Path: p, Off: r.Off,
			Err: fmt.Errorf("origin refused range at %d of a %d-byte object", r.Off, e.Version.Size)}
	}
	return &body{version: e.Version, path: p, off: r.Off}, nil
}

// Probe implements the check sources.Probe makes before mounting: one listing call of
// the root, so wrong credentials, a missing bucket or an unreachable endpoint fail the
// mount with a message that says which.
func (s *Source) Probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, _, err := s.bucket.ListPage(ctx, blob.FirstPageToken, 1, &blob.ListOptions{Prefix: s.prefix, Delimiter: "/"})
	if err == nil {
		if s.spares != nil {
			go s.spares.Fill(spare.Target + 1)
		}
		return nil
	}
	err = oneLine{s.mapErr(err)}
	switch {
	case noCredentials(err):
		return fmt.Errorf("playhead: %s: no credentials found (%s): %w", s.name, credentialHint(s.kind), err)
	case errors.Is(err, source.ErrPermission):
		return fmt.Errorf("playhead: %s refuses access: check the credentials (%s): %w", s.name, credentialHint(s.kind), err)
	case errors.Is(err, source.ErrNotFound):
		return fmt.Errorf("playhead: %s: no such bucket or container: %w", s.name, err)
	}
	return fmt.Errorf("playhead: cannot reach %s: %w", s.name, err)
}

// oneLine shows an error on one line: the Azure SDK lists every credential it tried on
// a line of its own, and a failed mount says what went wrong in one line.
type oneLine struct{ err error }

func (e oneLine) Error() string {
	return strings.Join(strings.Fields(strings.ReplaceAll(e.err.Error(), "\n", "; ")), " ")
}

func (e oneLine) Unwrap() error { return e.err }

// noCredentials reports whether err says the SDK found no credentials to sign with. The
// SDKs give no typed error for it, only their words: the AWS SDK's "get identity" step,
// the Azure SDK's DefaultAzureCredential chain.
func noCredentials(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "get identity: get credentials") || strings.Contains(msg, "DefaultAzureCredential")
}

// credentialHint names where each cloud's credentials come from.
func credentialHint(k Kind) string {
	switch k {
	case S3:
		return "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws, or the instance role; --s3-no-sign for a public bucket"
	case Azure:
		return "AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN, AZURE_STORAGE_CONNECTION_STRING, or an Azure identity"
	case GCS:
		return "GOOGLE_APPLICATION_CREDENTIALS or the default service account"
	}
	return "the cloud's credential chain"
}

// body is an open range: the reader and the bytes it still owes.
type body struct {
	rd     io.ReadCloser           // nil for an empty range
	cancel context.CancelCauseFunc // ends rd's request context
	// ctx is the caller's: once it is done, Read fails even where the SDK has the rest of
	// the body buffered (the GCS client reads ahead of its caller).
	ctx     context.Context
	version source.Version
	left    int64
	path    string // for errors
	off     int64  // offset of the next byte, for errors

	// Close may come from another goroutine to abort a blocked Read, but gocloud.dev's
	// Reader must not be closed while it reads: Close cancels the request (which ends
	// the Read) and the reader is closed by whichever of Close and that Read ends last.
	mu       sync.Mutex
	reading  bool
	closed   bool
	released bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return 0, &source.PathError{Op: "read", Path: b.path, Off: b.off, Err: errBodyClosed}
	}
	if err := b.ctx.Err(); err != nil {
		b.mu.Unlock()
		return 0, &source.PathError{Op: "read", Path: b.path, Off: b.off, Err: err}
	}
	b.reading = true
	b.mu.Unlock()
	n, err := b.rd.Read(p)
	b.mu.Lock()
	b.reading = false
	if b.closed {
		b.release()
	}
	b.mu.Unlock()
	b.left -= int64(n)
	b.off += int64(n)
	switch {
	case err == io.EOF && b.left > 0:
		err = io.ErrUnexpectedEOF // the origin sent less than it promised
	case err != nil && err != io.EOF:
		err = &source.PathError{Op: "read", Path: b.path, Off: b.off, Err: err}
	}
	return n, err
}

// errBodyClosed: Read after Close.
var errBodyClosed = errors.New("body closed")

func (b *body) Close() error {
	if b.rd == nil {
		return nil
	}
	b.mu.Lock()
	b.closed = true
	reading := b.reading
	if !reading {
		b.release()
	}
	b.mu.Unlock()
	if reading {
		b.cancel(nil) // ends the Read, which then releases the reader
	}
	return nil
}

// release closes the reader and ends its request, once. Caller holds mu.
func (b *body) release() {
	if !b.released {
		b.released = true
		b.rd.Close()
		b.cancel(nil)
	}
}

func (b *body) Version() source.Version { return b.version }
