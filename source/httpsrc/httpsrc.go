// Package httpsrc reaches files on an HTTP(S) server: ranged GETs for bytes, HEAD for
// sizes and versions, and directory listings (nginx, Apache, Go http.FileServer) for
// names.
//
// Design notes and traps:
//   - New does no I/O. The first call (or Probe) asks the origin once whether a URL
//     without a trailing slash is a single file or a directory that redirects to its slash
//     form. A single-file URL is shown as a root directory holding that one file.
//   - Connections are the expensive thing on a long link: a new TCP connection costs a
//     round trip (TLS two). The transport keeps up to MaxIdleConnsPerHost idle keep-alive
//     connections (Go's default of 2 silently closes the rest), and a body read to its
//     end returns its connection to the pool. A body closed early costs its connection;
//     Warm re-opens one in the background so the next seek does not pay for the dial.
//   - HTTP/1.1 only: each ranged GET gets its own TCP connection, so several streams add
//     up against per-connection caps, and no stream is held to HTTP/2's per-stream flow
//     control window.
//   - Compression is off: a range must be bytes of the file, not of a gzip stream.
//   - Every range is conditional on the version the caller wants (If-Match on a strong
//     ETag, else If-Unmodified-Since), and the answer is checked again (Content-Range
//     total, ETag, Last-Modified), so a file replaced at the origin gives ErrChanged, never
//     a mix of old and new bytes. A weak ETag is never sent in If-Match: strong
//     comparison would always fail.
//   - HTML listings give minute-precision times in the server's unknown time zone (taken
//     as UTC), so their times go to Entry.ModTime, shown but never compared: in
//     Version.ModTime they would not match Last-Modified and every range would fail as
//     changed. Their sizes are kept only when exact. JSON listings (nginx
//     autoindex_format json) give both exactly, and the time goes to Version.ModTime.
package httpsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/playhead/playhead/source/internal/spare"

	"github.com/playhead/playhead/source"
)

// Options configure a Source. The zero value is valid and means the defaults.
type Options struct {
	// Client makes every request. Nil means a client over a transport built from the
	// fields below. A caller's client is used as is: its transport settings (idle
	// connections, compression, timeouts) are then the caller's responsibility.
	Client *http.Client
	// MaxIdleConnsPerHost is how many idle keep-alive connections to the origin are kept
	// for reuse. Set it at least to the number of concurrent streams, or every extra stream
	// pays a new connection. Zero means 32.
	MaxIdleConnsPerHost int
	// Timeout bounds the wait for response headers after a range is sent (not its body:
	// a long range may take minutes, and the fetcher watches its progress), and every
	// metadata request (HEAD, listing) as a whole, with a deadline that restarts whenever
	// its body makes progress (see meta.go). The mount sets it from --io-timeout. Zero
	// means 30s.
	Timeout time.Duration
	// UserAgent is sent with every request. Empty means "playhead".
	UserAgent string
}

// Defaults for Options.
const (
	defaultMaxIdleConnsPerHost = 32
	defaultTimeout             = 30 * time.Second
	defaultUserAgent           = "playhead"
)

// DefaultOptions returns Options with every default filled in.
func DefaultOptions() Options {
	return Options{
		MaxIdleConnsPerHost: defaultMaxIdleConnsPerHost,
		Timeout:             defaultTimeout,
		UserAgent:           defaultUserAgent,
	}
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	if o.MaxIdleConnsPerHost < 0 {
		return fmt.Errorf("httpsrc: MaxIdleConnsPerHost %d is negative", o.MaxIdleConnsPerHost)
	}
	if o.Timeout < 0 {
		return fmt.Errorf("httpsrc: Timeout %v is negative", o.Timeout)
	}
	return nil
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.MaxIdleConnsPerHost == 0 {
		o.MaxIdleConnsPerHost = d.MaxIdleConnsPerHost
	}
	if o.Timeout == 0 {
		o.Timeout = d.Timeout
	}
	if o.UserAgent == "" {
		o.UserAgent = d.UserAgent
	}
	return o
}

// rootName is the Entry.Name of the root directory (Stat("")).
const rootName = "."

// kind is what the source URL turned out to be.
type kind int

const (
	kindUnknown kind = iota // not probed yet
	kindDir                 // the URL is a directory: paths are below it
	kindFile                // the URL is one file: the root holds only it
)

// Source is an HTTP(S) origin. It is safe for concurrent use.
type Source struct {
	raw       string   // the URL as given, for errors
	given     *url.URL // the URL as given, parsed
	client    *http.Client
	userAgent string
	timeout   time.Duration // Options.Timeout: bounds metadata requests (meta.go)

	spare *spare.Conns // keeps idle connections ready (source/internal/spare)

	closed context.Context    // done once Close was called
	close  context.CancelFunc // ends closed

	mu       sync.Mutex     // guards the fields below
	kind     kind           // kindUnknown until probed
	dir      *url.URL       // directory URL, path ending in '/': paths resolve against it
	file     *url.URL       // for kindFile: the file's URL
	fileName string         // for kindFile: the one name in the root
	fileVer  source.Version // for kindFile: the version the probe saw
}

var _ source.Source = (*Source)(nil)

// New returns a source for rawURL: a directory when the URL ends in '/', otherwise first
// tried as a single file (see Probe). It does no I/O.
func New(rawURL string, opts Options) (*Source, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("playhead: bad source URL %q: %w", rawURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("playhead: bad source URL %q: scheme must be http or https, not %q", rawURL, u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, fmt.Errorf("playhead: bad source URL %q: no host", rawURL)
	}
	if u.Fragment != "" {
		return nil, fmt.Errorf("playhead: bad source URL %q: a fragment (#...) cannot name a file", rawURL)
	}
	if u.Path == "" {
		u.Path, u.RawPath = "/", ""
	}
	s := &Source{raw: rawURL, given: u, userAgent: opts.UserAgent, client: opts.Client, timeout: opts.Timeout}
	s.closed, s.close = context.WithCancel(context.Background())
	s.spare = spare.New(s.Warm)
	if s.client == nil {
		s.client = &http.Client{Transport: newTransport(opts, s.spare)}
	}
	if strings.HasSuffix(u.Path, "/") {
		s.kind, s.dir = kindDir, u
	} else if name := path.Base(u.Path); !validName(name) {
		return nil, fmt.Errorf("playhead: bad source URL %q: last path segment %q is not a file name", rawURL, name)
	}
	return s, nil
}

// CloseIdleConnections closes the keep-alive connections idle in the pool, spares
// included. Connections carrying a range close when their body is closed.
func (s *Source) CloseIdleConnections() { s.client.CloseIdleConnections() }

// String implements source.Source: the URL with any password hidden.
func (s *Source) String() string { return s.given.Redacted() }

// Probe asks the origin for the source URL (HEAD, or a one-byte GET where HEAD is not
// allowed) and reports an unreachable or refusing origin clearly. For a URL without a
// trailing slash it decides whether it names one file, or a directory (the origin
// redirects to the slash form). The other methods probe by themselves when needed.
func (s *Source) Probe(ctx context.Context) error {
	if err := s.probe(ctx); err != nil {
		return err
	}
	// Start with spareTarget+1 connections: the first range and its read-ahead follow
	// each other within milliseconds, too soon for spares dialed on demand.
	go s.spare.Fill(spare.Target + 1)
	return nil
}

func (s *Source) probe(ctx context.Context) error {
	s.mu.Lock()
	k := s.kind
	s.mu.Unlock()
	if k == kindDir {
		resp, err := s.head(ctx, s.given)
		if err != nil {
			return s.unreachable(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("playhead: origin %s: %w", s, statusError(resp))
		}
		return nil
	}
	resp, err := s.head(ctx, s.given)
	if err != nil {
		return s.unreachable(err)
	}
	resp.Body.Close()
	final := resp.Request.URL
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case final.Path == s.given.Path+"/":
		d := *s.given
		d.Path, d.RawPath = d.Path+"/", ""
		s.kind, s.dir = kindDir, &d
	case resp.StatusCode/100 == 2:
		d := *s.given
		d.Path, d.RawPath = path.Dir(d.Path), ""
		if !strings.HasSuffix(d.Path, "/") {
			d.Path += "/"
		}
		s.kind, s.dir, s.file = kindFile, &d, s.given
		s.fileName = path.Base(s.given.Path)
		s.fileVer = versionOf(resp)
	default:
		return fmt.Errorf("playhead: origin %s: %w", s, statusError(resp))
	}
	return nil
}

func (s *Source) unreachable(err error) error {
	return fmt.Errorf("playhead: origin unreachable: %s: %w", s, err)
}

// resolve probes once if needed.
func (s *Source) resolve(ctx context.Context) error {
	s.mu.Lock()
	k := s.kind
	s.mu.Unlock()
	if k != kindUnknown {
		return nil
	}
	return s.probe(ctx)
}

// Warm makes sure an idle keep-alive connection to the origin is ready, by sending a
// cheap HEAD of the source URL and reading the answer to the end. Call it after closing a
// body early (which costs its connection), so the next range does not pay a dial.
// After Close it does nothing, and Close aborts a Warm in flight: a warm-up answered
// after Close would leave its connection in the pool with nobody to close it.
func (s *Source) Warm(ctx context.Context) error {
	if s.closed.Err() != nil {
		return errClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.closed, cancel)()
	resp, err := s.head(ctx, s.given)
	if err != nil {
		return s.unreachable(err)
	}
	io.Copy(io.Discard, resp.Body) // a HEAD body is empty; reading it frees the connection
	err = resp.Body.Close()
	if s.closed.Err() != nil {
		s.client.CloseIdleConnections() // Close ran while this connection was busy
	}
	return err
}

// errClosed is returned by Warm after Close.
var errClosed = errors.New("httpsrc: source closed")

// Close stops background warm-ups and closes the idle keep-alive connections. Ranges
// still open keep their connections until their bodies are closed. The source must not
// be used afterwards. vfs.FS.Close calls it.
func (s *Source) Close() error {
	s.close()
	s.spare.Close()
	s.client.CloseIdleConnections()
	return nil
}

// fileURL returns the URL of path (no trailing slash), or an error for paths the source
// cannot have. For a single-file source only its one name exists.
func (s *Source) fileURL(p string) (*url.URL, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kind == kindFile {
		if p != s.fileName {
			return nil, source.ErrNotFound
		}
		return s.file, nil
	}
	if !validPath(p) {
		return nil, fmt.Errorf("%w: invalid path", source.ErrNotFound)
	}
	u := *s.dir
	u.Path, u.RawPath = s.dir.Path+p, ""
	u.RawQuery, u.Fragment = "", ""
	return &u, nil
}

// dirURL returns the listing URL of the directory p (trailing slash).
func (s *Source) dirURL(p string) (*url.URL, error) {
	if p == "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.dir, nil
	}
	u, err := s.fileURL(p)
	if err != nil {
		return nil, err
	}
	d := *u
	d.Path += "/"
	return &d, nil
}

func (s *Source) isFileSource() (bool, string, source.Version) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kind == kindFile, s.fileName, s.fileVer
}

func (s *Source) newRequest(ctx context.Context, method string, u *url.URL) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", s.userAgent)
	return req, nil
}

// head sends a HEAD for u; where the origin does not allow HEAD (405, 501) it sends a
// GET of the first byte instead and closes that body. Both are bounded by the timeout
// (metaDo).
func (s *Source) head(ctx context.Context, u *url.URL) (*http.Response, error) {
	resp, err := s.metaDo(ctx, http.MethodHead, u, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusMethodNotAllowed && resp.StatusCode != http.StatusNotImplemented {
		return resp, nil
	}
	resp.Body.Close()
	resp, err = s.metaDo(ctx, http.MethodGet, u, func(req *http.Request) { req.Header.Set("Range", "bytes=0-0") })
	if err != nil {
		return nil, err
	}
	// Keep status and headers only; the caller reads sizes through versionOf, which
	// understands a 206's Content-Range.
	resp.Body.Close()
	resp.Body = http.NoBody
	return resp, nil
}

// versionOf reads the version an answer describes: the Content-Range total of a 206,
// else Content-Length; Last-Modified; ETag.
func versionOf(resp *http.Response) source.Version {
	v := source.Version{Size: -1, ETag: resp.Header.Get("ETag")}
	if resp.StatusCode == http.StatusPartialContent {
		if _, _, total, err := parseContentRange(resp.Header.Get("Content-Range")); err == nil {
			v.Size = total
		}
	} else if resp.StatusCode/100 == 2 && resp.ContentLength >= 0 {
		v.Size = resp.ContentLength
	}
	if lm := resp.Header.Get("Last-Modified"); lm != "" {
		if t, err := http.ParseTime(lm); err == nil {
			v.ModTime = t
		}
	}
	return v
}

// statusError turns an unexpected HTTP status into an error wrapping the source error it
// means, if any.
func statusError(resp *http.Response) error {
	var sentinel error
	switch resp.StatusCode {
	case http.StatusNotFound, http.StatusGone:
		sentinel = source.ErrNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		sentinel = source.ErrPermission
	case http.StatusPreconditionFailed:
		sentinel = source.ErrChanged
	default:
		return fmt.Errorf("origin answered %q for %s", resp.Status, resp.Request.URL.Redacted())
	}
	return fmt.Errorf("%w (HTTP %q for %s)", sentinel, resp.Status, resp.Request.URL.Redacted())
}

// validName reports whether name can be one path element.
func validName(name string) bool {
	if name == "" || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == '/' || c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// validPath reports whether p is a relative slash path of valid names.
func validPath(p string) bool {
	for name := range strings.SplitSeq(p, "/") {
		if !validName(name) {
			return false
		}
	}
	return true
}

// errIsDir is returned when a directory is opened as a file: there is no file at that
// path, which is permanent.
var errIsDir = fmt.Errorf("%w: a directory, not a file", source.ErrNotFound)

// redirectedToDir reports whether resp, the answer to a request for u, came from u's
// slash form: servers redirect a directory's URL asked without its slash there.
func redirectedToDir(resp *http.Response, u *url.URL) bool {
	final := resp.Request.URL.Path
	return final != u.Path && strings.HasSuffix(final, "/")
}
