// Package origin is playhead's built-in HTTP origin: a small file server for
// `playhead demo`, benchmarks and integration tests. It serves generated pattern files
// (any size, no disk, every byte checkable with internal/pattern) and optionally a real
// directory, the way nginx does: ranges and conditional requests through
// http.ServeContent, strong ETags, Last-Modified, and autoindex listings in nginx's JSON
// or HTML form.
//
// Design notes and traps:
//   - Replace bumps a generated file's generation: its bytes (pattern seed + generation),
//     ETag and mtime all change, so a client holding the old version gets 412 on a
//     conditional range, exactly like an object rewritten at a real origin.
//   - mtimes are whole seconds (HTTP dates are), starting at a fixed date, so a listing
//     and a HEAD report equal times and runs compare equal.
//   - The counters count what crossed the wire: requests, response body bytes, new TCP
//     connections (only for a server started with Start; ConnState is per http.Server).
//     Tests use NewConns to prove connection reuse.
//   - Paths in Files are slash-separated without a leading slash; an invalid one panics
//     in New, as a program bug.
package origin

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// File is a generated file: Size bytes of the pattern for Seed, or, when Path is set,
// the first Size bytes of the file at Path on local disk (media made by a real encoder,
// which no pattern can stand for). Seed still tells files apart in ETags.
type File struct {
	Seed uint64
	Size int64
	// Path is a file on local disk whose bytes are served; empty means the pattern. Its
	// bytes must not change while it is served: the ETag does not follow them.
	Path string
}

// Options configure a Server.
type Options struct {
	// Files are generated files by path (slash-separated, no leading slash). Directories
	// are implied by the paths.
	Files map[string]File
	// Dir, if not empty, is a real directory served alongside Files (a generated file
	// shadows a real one of the same path).
	Dir string
	// ModTime is the Last-Modified of generation 0 of every generated file; each Replace
	// adds a second. Zero means 2024-01-01 00:00:00 UTC.
	ModTime time.Time
	// RequestLog, if not nil, gets a line per request once it is answered: the method,
	// path, Range, status, the body bytes written and how long the answer took. Written
	// bytes are what the server handed the kernel; a range whose client went away early
	// shows more written than its client read (bytes left in socket buffers).
	RequestLog io.Writer
}

// defaultModTime is the default Options.ModTime: fixed so runs compare equal.
var defaultModTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Stats counts traffic.
type Stats struct {
	Requests     int64 // HTTP requests handled
	BytesWritten int64 // response body bytes written
	NewConns     int64 // TCP connections accepted (servers started with Start only)
}

// Server is the origin. It is an http.Handler; Start also runs it on a listener.
type Server struct {
	dir     string
	root    *os.Root // Dir opened, nil without Dir
	modTime time.Time

	requests, bytesWritten, newConns atomic.Int64

	logMu sync.Mutex // serializes lines to log
	log   io.Writer  // Options.RequestLog

	mu    sync.Mutex        // guards files and srv
	files map[string]*vfile // generated files
	srv   *http.Server      // set by Start
}

// vfile is a generated file and its current generation.
type vfile struct {
	File
	gen int64
}

// New returns a server for opts. It panics on an invalid path in Files or a Dir that
// cannot be opened.
func New(opts Options) *Server {
	s := &Server{dir: opts.Dir, modTime: opts.ModTime, files: make(map[string]*vfile), log: opts.RequestLog}
	if s.modTime.IsZero() {
		s.modTime = defaultModTime
	}
	s.modTime = s.modTime.Truncate(time.Second)
	for p, f := range opts.Files {
		s.Add(p, f)
	}
	if opts.Dir != "" {
		root, err := os.OpenRoot(opts.Dir)
		if err != nil {
			panic(fmt.Sprintf("origin: %v", err))
		}
		s.root = root
	}
	return s
}

// Add adds or resets a generated file at p (generation 0).
func (s *Server) Add(p string, f File) {
	if !fs.ValidPath(p) || p == "." || f.Size < 0 {
		panic(fmt.Sprintf("origin: invalid file %q (size %d)", p, f.Size))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[p] = &vfile{File: f}
}

// Replace bumps the generation of the generated file at p: new bytes, ETag and mtime.
func (s *Server) Replace(p string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[p]
	if !ok {
		return fmt.Errorf("origin: replace %q: no generated file there", p)
	}
	if f.Path != "" {
		return fmt.Errorf("origin: replace %q: its bytes come from %s, which has only one version", p, f.Path)
	}
	s.files[p] = &vfile{File: f.File, gen: f.gen + 1}
	return nil
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	return Stats{Requests: s.requests.Load(), BytesWritten: s.bytesWritten.Load(), NewConns: s.newConns.Load()}
}

// ResetStats zeroes the counters.
func (s *Server) ResetStats() {
	s.requests.Store(0)
	s.bytesWritten.Store(0)
	s.newConns.Store(0)
}

// readHeaderTimeout drops clients that connect and never send a request.
const readHeaderTimeout = 10 * time.Second

// Start listens on addr ("" means 127.0.0.1:0, a free loopback port) and serves in the
// background. It returns the base URL, ending in '/'.
func (s *Server) Start(addr string) (string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return "", errors.New("origin: already started")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("origin: %w", err)
	}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: readHeaderTimeout,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.newConns.Add(1)
			}
		},
	}
	go s.srv.Serve(l)
	return "http://" + l.Addr().String() + "/", nil
}

// Close stops a started server, closing its connections, and releases Dir.
func (s *Server) Close() error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	var err error
	if srv != nil {
		err = srv.Close()
	}
	if s.root != nil {
		s.root.Close()
	}
	return err
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	cw := &countingWriter{ResponseWriter: w, n: &s.bytesWritten}
	if s.log != nil {
		start := time.Now()
		defer func() { s.logRequest(r, cw, time.Since(start)) }()
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		cw.Header().Set("Allow", "GET, HEAD")
		http.Error(cw, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	wantDir := strings.HasSuffix(r.URL.Path, "/")
	p := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")

	if f, ok := s.file(p); ok {
		if wantDir {
			http.NotFound(cw, r)
			return
		}
		s.serveGenerated(cw, r, p, f)
		return
	}
	if s.isDir(p) {
		if !wantDir {
			http.Redirect(cw, r, r.URL.Path+"/", http.StatusMovedPermanently)
			return
		}
		s.serveListing(cw, r, p)
		return
	}
	if !wantDir && s.serveDisk(cw, r, p) {
		return
	}
	http.NotFound(cw, r)
}

func (s *Server) file(p string) (vfile, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[p]
	if !ok {
		return vfile{}, false
	}
	return *f, true
}

// isDir reports whether p is a directory: of generated files, or in Dir.
func (s *Server) isDir(p string) bool {
	if p == "" {
		return true
	}
	s.mu.Lock()
	prefix := p + "/"
	for fp := range s.files {
		if strings.HasPrefix(fp, prefix) {
			s.mu.Unlock()
			return true
		}
	}
	s.mu.Unlock()
	if s.root == nil {
		return false
	}
	fi, err := s.root.Stat(p)
	return err == nil && fi.IsDir()
}

// logRequest writes r's line to the request log (Options.RequestLog).
func (s *Server) logRequest(r *http.Request, cw *countingWriter, took time.Duration) {
	rng := r.Header.Get("Range")
	if rng == "" {
		rng = "-"
	}
	status := cw.status
	if status == 0 {
		status = http.StatusOK
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.log, "%s %s %s range=%s status=%d written=%d took=%s\n", time.Now().UTC().Format("15:04:05.000"),
		r.Method, r.URL.Path, rng, status, cw.written, took.Round(time.Millisecond))
}

// countingWriter counts response body bytes. It hides the writer's io.ReaderFrom (and so
// sendfile for Dir files): counting must not depend on how the bytes are copied.
type countingWriter struct {
	http.ResponseWriter
	n       *atomic.Int64
	written int64 // this response's body bytes (the request log's)
	status  int   // the status written, 0 before WriteHeader
}

// Write counts the bytes before writing them, so a client that has read them all sees
// them counted; a short write takes back what was not written.
func (c *countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	n, err := c.ResponseWriter.Write(p)
	if n < len(p) {
		c.n.Add(int64(n - len(p)))
	}
	c.written += int64(n)
	return n, err
}

// WriteHeader records the status for the request log.
func (c *countingWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the real writer (Flush, deadlines).
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
