// Package faultorigin is an HTTP origin for tests that misbehaves on cue: it serves
// pattern files (internal/pattern) from one directory with http.ServeContent, lists them
// as nginx's JSON autoindex does (exact sizes and times), and a script decides, for each
// ranged GET, whether to answer it properly or to fail in one of the ways real origins
// and the networks in front of them fail: an error status, a body cut short or dropped
// mid-way or going silent, the whole file instead of the range, a Content-Range that
// is off or unreadable, a missing ETag. Files can be replaced between or during requests; a request already answering
// keeps serving the version it started with, as a real server streaming a file does.
//
// Traps: ranged GETs are counted from 1 in the order the server receives them, so with
// concurrent readers "the Nth request" is whichever arrives Nth; HEADs and listings are
// never counted or faulted. A fault that lies about the bytes themselves (a Content-Range
// naming other bytes than the body holds) is deliberately absent: nothing in HTTP lets a
// client detect it.
package faultorigin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/playhead/playhead/internal/pattern"
)

// Kind is one way to answer a ranged GET.
type Kind int

const (
	// OK answers properly.
	OK Kind = iota
	// Status503 answers 503 Service Unavailable.
	Status503
	// ShortRange answers a 206 for only the first At bytes of the range asked: legal
	// HTTP, and the client must ask again for the rest.
	ShortRange
	// AbortAt sends At bytes of the body, then drops the connection.
	AbortAt
	// IgnoreRange answers 200 with the whole file, as a server without Range support.
	IgnoreRange
	// WrongStart answers a 206 whose range (and bytes) start At bytes after the asked
	// start; its Content-Range says so.
	WrongStart
	// WrongTotal answers a 206 whose Content-Range total is one byte more than the size.
	WrongTotal
	// NoETag answers properly but without an ETag header (If-Match is still honoured).
	NoETag
	// StallAt sends At bytes of the body, then sends nothing more until the client
	// gives up (or StallCap passes), as a connection that went silently dead.
	StallAt
	// StallHeaders sends nothing at all until the client gives up (or StallCap passes).
	StallHeaders
	// BadContentRange answers a 206 whose Content-Range cannot be parsed.
	BadContentRange
)

// StallCap bounds a stall, so that a client that never gives up cannot keep the
// server (and Close) waiting forever.
const StallCap = 30 * time.Second

var kindNames = [...]string{"ok", "503", "short-range", "abort", "ignore-range", "wrong-start", "wrong-total", "no-etag",
	"stall", "stall-headers", "bad-content-range"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is what happens to one ranged GET.
type Fault struct {
	Kind Kind
	At   int64 // bytes, for ShortRange, AbortAt and WrongStart; at least 1 is used
}

// Script picks the fault of the nth ranged GET (from 1) of path.
type Script func(n int, path string) Fault

// Server is the origin. Its URL ends in '/'.
type Server struct {
	*httptest.Server
	URL string

	ranges, faults atomic.Int64

	mu       sync.Mutex
	files    map[string]*file
	script   Script
	gen      int
	noETags  bool
	html     bool
	faultLog map[Kind]int
}

// file is one immutable version.
type file struct {
	seed    uint64
	size    int64
	modTime time.Time
	etag    string
}

// New starts an origin with no files; it stops when the test's cleanup calls Close.
func New() *Server {
	s := &Server{files: map[string]*file{}, faultLog: map[Kind]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.Server.URL + "/"
	return s
}

// Put stores (or replaces) name as the pattern file of seed and size, modified at mod
// (HTTP keeps whole seconds). Each Put is a new version with a new ETag.
func (s *Server) Put(name string, seed uint64, size int64, mod time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.files[name] = &file{seed: seed, size: size, modTime: mod.UTC().Truncate(time.Second),
		etag: fmt.Sprintf(`"v%d-%x"`, s.gen, seed)}
}

// SetScript sets the script for the next ranged GETs; nil answers every one properly.
func (s *Server) SetScript(sc Script) {
	s.mu.Lock()
	s.script = sc
	s.mu.Unlock()
}

// SetNoETags makes the origin one that never sends or checks ETags (only Last-Modified).
func (s *Server) SetNoETags(on bool) {
	s.mu.Lock()
	s.noETags = on
	s.mu.Unlock()
}

// SetHTMLListing makes the listing nginx's default HTML autoindex: exact sizes, but
// times to the minute in an unknown zone, which a client cannot use as versions.
func (s *Server) SetHTMLListing(on bool) {
	s.mu.Lock()
	s.html = on
	s.mu.Unlock()
}

// Ranges is the number of ranged GETs received so far.
func (s *Server) Ranges() int { return int(s.ranges.Load()) }

// Faults is the number of ranged GETs answered with a fault so far.
func (s *Server) Faults() int { return int(s.faults.Load()) }

// FaultsByKind counts the faults injected, by kind.
func (s *Server) FaultsByKind() map[Kind]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[Kind]int, len(s.faultLog))
	for k, v := range s.faultLog {
		out[k] = v
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/")
	s.mu.Lock()
	f := s.files[name]
	noETags := s.noETags
	script := s.script
	s.mu.Unlock()
	if name == "" {
		s.list(w)
		return
	}
	if f == nil {
		http.NotFound(w, r)
		return
	}
	fault := Fault{}
	if r.Method == http.MethodGet && r.Header.Get("Range") != "" {
		n := int(s.ranges.Add(1))
		if script != nil {
			fault = script(n, name)
		}
		if fault.Kind != OK {
			s.faults.Add(1)
			s.mu.Lock()
			s.faultLog[fault.Kind]++
			s.mu.Unlock()
		}
	}
	if !noETags {
		w.Header().Set("ETag", f.etag)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	at := max(fault.At, 1)
	switch fault.Kind {
	case Status503:
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	case StallHeaders:
		stall(r)
		return
	case IgnoreRange:
		r.Header.Del("Range")
	case ShortRange, WrongStart:
		first, last, ok := parseRange(r.Header.Get("Range"), f.size)
		if !ok {
			break
		}
		if fault.Kind == ShortRange {
			last = min(last, first+at-1)
		} else {
			first = min(first+at, last)
		}
		r.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", first, last))
	}
	var out http.ResponseWriter = w
	switch fault.Kind {
	case AbortAt:
		out = &abortWriter{ResponseWriter: w, left: at}
	case StallAt:
		out = &abortWriter{ResponseWriter: w, left: at, before: func() { stall(r) }}
	case WrongTotal:
		out = &headerRewriter{ResponseWriter: w, rewrite: func(h http.Header) {
			if cr := h.Get("Content-Range"); cr != "" {
				h.Set("Content-Range", strings.TrimSuffix(cr, "/"+strconv.FormatInt(f.size, 10))+"/"+strconv.FormatInt(f.size+1, 10))
			}
		}}
	case NoETag:
		out = &headerRewriter{ResponseWriter: w, rewrite: func(h http.Header) { h.Del("ETag") }}
	case BadContentRange:
		out = &headerRewriter{ResponseWriter: w, rewrite: func(h http.Header) {
			if h.Get("Content-Range") != "" {
				h.Set("Content-Range", "bytes 12-x/what")
			}
		}}
	}
	http.ServeContent(out, r, name, f.modTime, &pattern.Reader{Seed: f.seed, Size: f.size})
}

// list answers with an nginx autoindex_format json listing of every file.
func (s *Server) list(w http.ResponseWriter) {
	type entry struct {
		Name  string `json:"name"`
		Type  string `json:"type"`
		MTime string `json:"mtime"`
		Size  int64  `json:"size"`
	}
	s.mu.Lock()
	var es []entry
	for name, f := range s.files {
		es = append(es, entry{name, "file", f.modTime.Format(http.TimeFormat), f.size})
	}
	html := s.html
	s.mu.Unlock()
	if html {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body><pre><a href=\"../\">../</a>\n")
		for _, e := range es {
			t, _ := time.Parse(http.TimeFormat, e.MTime)
			fmt.Fprintf(w, "<a href=\"%s\">%s</a>    %s    %d\n", e.Name, e.Name, t.Format("02-Jan-2006 15:04"), e.Size)
		}
		fmt.Fprint(w, "</pre></body></html>\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(es)
}

// parseRange reads the one range of a "bytes=a-b" or "bytes=a-" header.
func parseRange(h string, size int64) (first, last int64, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	a, b, found2 := strings.Cut(spec, "-")
	if !found || !found2 || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil || first >= size {
		return 0, 0, false
	}
	last = size - 1
	if b != "" {
		if last, err = strconv.ParseInt(b, 10, 64); err != nil {
			return 0, 0, false
		}
		last = min(last, size-1)
	}
	return first, last, first <= last
}

// stall waits until the client gives up on r or StallCap passes.
func stall(r *http.Request) {
	t := time.NewTimer(StallCap)
	defer t.Stop()
	select {
	case <-r.Context().Done():
	case <-t.C:
	}
}

// abortWriter drops the connection once left body bytes are written, after calling
// before (if set).
type abortWriter struct {
	http.ResponseWriter
	left   int64
	before func()
}

func (a *abortWriter) Write(p []byte) (int, error) {
	if int64(len(p)) < a.left {
		a.left -= int64(len(p))
		return a.ResponseWriter.Write(p)
	}
	a.ResponseWriter.Write(p[:a.left])
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush() // the bytes before the cut reach the client
	}
	if a.before != nil {
		a.before()
	}
	panic(http.ErrAbortHandler) // the server closes the connection without a clean end
}

// headerRewriter edits the response headers just before they are sent.
type headerRewriter struct {
	http.ResponseWriter
	rewrite func(http.Header)
	done    bool
}

func (h *headerRewriter) WriteHeader(code int) {
	if !h.done {
		h.done = true
		h.rewrite(h.Header())
	}
	h.ResponseWriter.WriteHeader(code)
}

func (h *headerRewriter) Write(p []byte) (int, error) {
	if !h.done {
		h.WriteHeader(http.StatusOK)
	}
	return h.ResponseWriter.Write(p)
}
