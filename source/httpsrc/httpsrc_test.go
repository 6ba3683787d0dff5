package httpsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
)

var errorsIs = errors.Is

type testFile struct {
	seed  uint64
	size  int64
	mtime time.Time
	etag  string
}

// Ways the test origin misbehaves.
const (
	behaveNormal         = iota
	behaveIgnoreRange    // answers every GET with 200 and the whole file
	behaveShort          // answers a range with half the bytes it promised
	behaveWrongStart     // answers a range one byte later than asked
	behaveIgnoreIf       // ignores If-Match and If-Unmodified-Since
	behaveStall          // sends 100 bytes of a range, then waits for the client to go
	behaveNoHead         // refuses HEAD with 405
	behaveForbidden      // 403 for everything
	behaveWeakETag       // sends weak ETags
	behaveBigger206Total // 206 with a total one larger than the file
)

type testOrigin struct {
	*httptest.Server
	behave      atomic.Int32
	newConns    atomic.Int64
	closedConns atomic.Int64
	mu          sync.Mutex
	remotes     []string             // client address of each request, in order
	methods     []string             // method of each request, in order
	connAt      map[string]time.Time // when each client address connected
	files       map[string]testFile  // URL path → file
}

func newTestOrigin(t *testing.T) *testOrigin {
	o := &testOrigin{files: map[string]testFile{}, connAt: map[string]time.Time{}}
	o.Server = httptest.NewUnstartedServer(o)
	o.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			o.newConns.Add(1)
			o.mu.Lock()
			o.connAt[c.RemoteAddr().String()] = time.Now()
			o.mu.Unlock()
		}
		if st == http.StateClosed {
			o.closedConns.Add(1)
		}
	}
	o.Start()
	t.Cleanup(o.Close)
	return o
}

// lastGetConnectedBefore reports whether the last GET arrived on a connection that was
// open before t, that is, one the request did not have to dial.
func (o *testOrigin) lastGetConnectedBefore(t time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	last := -1
	for i, m := range o.methods {
		if m == http.MethodGet {
			last = i
		}
	}
	at, ok := o.connAt[o.remotes[last]]
	return ok && at.Before(t)
}

func (o *testOrigin) add(path string, seed uint64, size int64) testFile {
	o.mu.Lock()
	defer o.mu.Unlock()
	gen := len(o.files)
	f := testFile{seed: seed, size: size,
		mtime: time.Date(2024, 1, 1, 0, 0, gen, 0, time.UTC),
		etag:  fmt.Sprintf(`"%d-%d-%d"`, seed, size, gen)}
	o.files[path] = f
	return f
}

func (f testFile) version() source.Version {
	return source.Version{Size: f.size, ModTime: f.mtime, ETag: f.etag}
}

func (o *testOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.remotes = append(o.remotes, r.RemoteAddr)
	o.methods = append(o.methods, r.Method)
	o.mu.Unlock()
	behave := o.behave.Load()
	if behave == behaveForbidden {
		http.Error(w, "go away", http.StatusForbidden)
		return
	}
	if behave == behaveNoHead && r.Method == http.MethodHead {
		http.Error(w, "no HEAD here", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case "/dir":
		http.Redirect(w, r, "/dir/", http.StatusMovedPermanently)
		return
	case "/dir/":
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<pre><a href="a.bin">a.bin</a></pre>`)
		return
	}
	o.mu.Lock()
	f, ok := o.files[r.URL.Path]
	o.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	etag := f.etag
	if behave == behaveWeakETag {
		etag = "W/" + etag
	}
	w.Header().Set("ETag", etag)
	w.Header().Set("Last-Modified", f.mtime.UTC().Format(http.TimeFormat))
	rd := &pattern.Reader{Seed: f.seed, Size: f.size}
	first, last, ranged := parseTestRange(r.Header.Get("Range"), f.size)
	switch behave {
	case behaveIgnoreRange:
		w.Header().Set("Content-Length", strconv.FormatInt(f.size, 10))
		io.Copy(w, rd)
		return
	case behaveShort, behaveWrongStart, behaveStall, behaveBigger206Total:
		if !ranged {
			break
		}
		total := f.size
		if behave == behaveWrongStart {
			first++
		}
		if behave == behaveBigger206Total {
			total++
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, total))
		w.Header().Set("Content-Length", strconv.FormatInt(last-first+1, 10))
		w.WriteHeader(http.StatusPartialContent)
		n := last - first + 1
		switch behave {
		case behaveShort:
			n /= 2
		case behaveStall:
			n = 100
		}
		rd.Seek(first, io.SeekStart)
		io.CopyN(w, rd, n)
		if behave == behaveStall {
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
		return
	case behaveIgnoreIf:
		r.Header.Del("If-Match")
		r.Header.Del("If-Unmodified-Since")
	}
	http.ServeContent(w, r, "", f.mtime, rd)
}

// parseTestRange understands "bytes=a-b" and "bytes=a-" only, enough for the misbehaving
// modes.
func parseTestRange(h string, size int64) (first, last int64, ok bool) {
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return 0, 0, false
	}
	a, b, _ := strings.Cut(spec, "-")
	first, _ = strconv.ParseInt(a, 10, 64)
	last = size - 1
	if b != "" {
		last, _ = strconv.ParseInt(b, 10, 64)
		last = min(last, size-1)
	}
	return first, last, first <= last
}

func newSource(t *testing.T, url string) *Source {
	t.Helper()
	s, err := New(url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readAll(t *testing.T, s source.Source, p string, r source.Range, want source.Version) ([]byte, source.Version, error) {
	t.Helper()
	b, err := s.OpenRange(context.Background(), p, r, want)
	if err != nil {
		return nil, source.Version{}, err
	}
	defer b.Close()
	data, err := io.ReadAll(b)
	return data, b.Version(), err
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, c := range []struct{ url, msg string }{
		{"ftp://example.org/", "scheme must be http or https"},
		{"example.org/media/", "scheme must be http or https"},
		{"http:///media/", "no host"},
		{"http://exa mple.org/", "bad source URL"},
		{"http://example.org/a#b", "fragment"},
		{"http://example.org/a/..", "not a file name"},
	} {
		_, err := New(c.url, Options{})
		if err == nil || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "playhead: bad source URL") {
			t.Errorf("New(%q) = %v, want error mentioning %q", c.url, err, c.msg)
		}
	}
	if _, err := New("https://user:pw@example.org/x/", Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := New("http://example.org/", Options{Timeout: -1}); err == nil {
		t.Fatal("negative timeout accepted")
	}
}

func TestProbe(t *testing.T) {
	o := newTestOrigin(t)
	f := o.add("/movies/film%20one.mkv", 1, 5000)
	ctx := context.Background()

	// A file URL: the root holds that one file.
	s := newSource(t, o.URL+"/movies/film%2520one.mkv")
	if err := s.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	entries, err := s.List(ctx, "")
	if err != nil || len(entries) != 1 || entries[0].Name != "film%20one.mkv" || !entries[0].Version.Matches(f.version()) || entries[0].Version.Size != 5000 {
		t.Fatalf("single-file root = %+v, %v", entries, err)
	}
	if data, _, err := readAll(t, s, "film%20one.mkv", source.Range{Off: 10, Len: 20}, f.version()); err != nil || pattern.Verify(1, data, 10) != nil || len(data) != 20 {
		t.Fatalf("read single file: %d bytes, %v", len(data), err)
	}
	if _, err := s.Stat(ctx, "other"); !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("Stat other in single-file source: %v", err)
	}

	// A directory URL without its slash is a directory, found by its redirect.
	s = newSource(t, o.URL+"/dir")
	if err := s.Probe(ctx); err != nil {
		t.Fatal(err)
	}
	if entries, err := s.List(ctx, ""); err != nil || len(entries) != 1 || entries[0].Name != "a.bin" {
		t.Fatalf("dir listing = %+v, %v", entries, err)
	}

	// Methods probe by themselves.
	s = newSource(t, o.URL+"/dir")
	if entries, err := s.List(ctx, ""); err != nil || len(entries) != 1 {
		t.Fatalf("unprobed dir listing = %+v, %v", entries, err)
	}

	if err := newSource(t, o.URL+"/missing").Probe(ctx); !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("probe missing: %v", err)
	}

	// An origin nobody listens on.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + l.Addr().String() + "/"
	l.Close()
	err = newSource(t, dead).Probe(ctx)
	if err == nil || !strings.Contains(err.Error(), "origin unreachable") {
		t.Fatalf("probe dead origin: %v", err)
	}
}

func TestStat(t *testing.T) {
	o := newTestOrigin(t)
	f := o.add("/a.bin", 3, 12345)
	s := newSource(t, o.URL+"/")
	ctx := context.Background()

	root, err := s.Stat(ctx, "")
	if err != nil || !root.IsDir {
		t.Fatalf("Stat root = %+v, %v", root, err)
	}
	e, err := s.Stat(ctx, "a.bin")
	if err != nil || e.IsDir || e.Name != "a.bin" || e.Version != f.version() {
		t.Fatalf("Stat = %+v, %v; want %v", e, err, f.version())
	}
	if e, err := s.Stat(ctx, "dir"); err != nil || !e.IsDir || e.Name != "dir" {
		t.Fatalf("Stat dir = %+v, %v", e, err)
	}
	if _, err := s.Stat(ctx, "nope"); !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("Stat missing: %v", err)
	}
	var pe *source.PathError
	if _, err := s.Stat(ctx, "nope"); !errors.As(err, &pe) || pe.Path != "nope" || pe.Op != "stat" {
		t.Fatalf("error %v does not carry the path", err)
	}

	o.behave.Store(behaveNoHead)
	if e, err := s.Stat(ctx, "a.bin"); err != nil || e.Version != f.version() {
		t.Fatalf("Stat without HEAD = %+v, %v", e, err)
	}
	o.behave.Store(behaveForbidden)
	if _, err := s.Stat(ctx, "a.bin"); !errors.Is(err, source.ErrPermission) {
		t.Fatalf("Stat forbidden: %v", err)
	}
}

func TestOpenRange(t *testing.T) {
	o := newTestOrigin(t)
	f := o.add("/a.bin", 3, 100000)
	s := newSource(t, o.URL+"/")
	v := f.version()

	for _, c := range []struct {
		r    source.Range
		want int
	}{
		{source.Range{Off: 0, Len: 1000}, 1000},
		{source.Range{Off: 99000, Len: -1}, 1000},
		{source.Range{Off: 99990, Len: 100}, 10},
		{source.Range{Off: 12345, Len: 1}, 1},
		{source.Range{Off: 100000, Len: 10}, 0},
		{source.Range{Off: 500000, Len: -1}, 0},
		{source.Range{Off: 5, Len: 0}, 0},
	} {
		data, got, err := readAll(t, s, "a.bin", c.r, v)
		if err != nil || len(data) != c.want {
			t.Errorf("%+v: %d bytes, %v; want %d", c.r, len(data), err, c.want)
			continue
		}
		if err := pattern.Verify(3, data, c.r.Off); err != nil {
			t.Errorf("%+v: %v", c.r, err)
		}
		if c.want > 0 && got != v {
			t.Errorf("%+v: body version %v, want %v", c.r, got, v)
		}
	}
	// Any version, and each field alone.
	for _, want := range []source.Version{source.AnyVersion, {Size: -1, ETag: v.ETag}, {Size: -1, ModTime: v.ModTime}, {Size: v.Size}} {
		if _, _, err := readAll(t, s, "a.bin", source.Range{Off: 1, Len: 10}, want); err != nil {
			t.Errorf("want %v: %v", want, err)
		}
	}
	if _, _, err := readAll(t, s, "nope", source.Range{Off: 0, Len: 10}, source.AnyVersion); !errors.Is(err, source.ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
	if _, _, err := readAll(t, s, "", source.Range{Off: 0, Len: 10}, source.AnyVersion); err == nil {
		t.Errorf("opened the root")
	}
}

func TestOpenRangeChanged(t *testing.T) {
	o := newTestOrigin(t)
	old := o.add("/a.bin", 3, 100000).version()
	o.add("/b.bin", 4, 10) // bump the generation
	cur := o.add("/a.bin", 5, 100000).version()
	s := newSource(t, o.URL+"/")

	for _, want := range []source.Version{
		old,                              // If-Match fails: 412
		{Size: -1, ModTime: old.ModTime}, // If-Unmodified-Since fails: 412
		{Size: 99999},                    // Content-Range total differs
		{Size: 100000, ETag: `"other"`},  // If-Match fails
		{Size: 200000, ETag: cur.ETag},   // size differs though ETag matches
	} {
		if _, _, err := readAll(t, s, "a.bin", source.Range{Off: 10, Len: 10}, want); !errors.Is(err, source.ErrChanged) {
			t.Errorf("want %v: %v, want ErrChanged", want, err)
		}
	}
	// An origin ignoring the conditions is caught by the answer's ETag and date.
	o.behave.Store(behaveIgnoreIf)
	if _, _, err := readAll(t, s, "a.bin", source.Range{Off: 10, Len: 10}, old); !errors.Is(err, source.ErrChanged) {
		t.Errorf("origin ignoring If-Match: %v", err)
	}
	if _, _, err := readAll(t, s, "a.bin", source.Range{Off: 10, Len: 10}, cur); err != nil {
		t.Errorf("current version: %v", err)
	}
	// Past the end of a file whose size changed.
	o.behave.Store(behaveNormal)
	if _, _, err := readAll(t, s, "a.bin", source.Range{Off: 150000, Len: -1}, source.Version{Size: 150000}); !errors.Is(err, source.ErrChanged) {
		t.Errorf("416 with other size: %v", err)
	}
	o.behave.Store(behaveBigger206Total)
	if _, _, err := readAll(t, s, "a.bin", source.Range{Off: 10, Len: 10}, source.Version{Size: 100000}); !errors.Is(err, source.ErrChanged) {
		t.Errorf("206 total differs: %v", err)
	}
}

func TestWeakETagNotSentInIfMatch(t *testing.T) {
	o := newTestOrigin(t)
	f := o.add("/a.bin", 3, 1000)
	o.behave.Store(behaveWeakETag)
	s := newSource(t, o.URL+"/")
	e, err := s.Stat(context.Background(), "a.bin")
	if err != nil || !strings.HasPrefix(e.Version.ETag, "W/") {
		t.Fatalf("Stat = %+v, %v", e, err)
	}
	data, _, err := readAll(t, s, "a.bin", source.Range{Off: 0, Len: -1}, e.Version)
	if err != nil || len(data) != int(f.size) {
		t.Fatalf("read with weak ETag: %d bytes, %v", len(data), err)
	}
}

func TestOriginIgnoringRange(t *testing.T) {
	o := newTestOrigin(t)
	f := o.add("/a.bin", 3, 9<<20)
	o.behave.Store(behaveIgnoreRange)
	s := newSource(t, o.URL+"/")
	v := f.version()

	data, _, err := readAll(t, s, "a.bin", source.Range{Off: 0, Len: 1000}, v)
	if err != nil || len(data) != 1000 || pattern.Verify(3, data, 0) != nil {
		t.Fatalf("off 0: %d bytes, %v", len(data), err)
	}
	data, _, err = readAll(t, s, "a.bin", source.Range{Off: 1 << 20, Len: 1000}, v)
	if err != nil || len(data) != 1000 || pattern.Verify(3, data, 1<<20) != nil {
		t.Fatalf("off 1 MiB: %d bytes, %v", len(data), err)
	}
	data, _, err = readAll(t, s, "a.bin", source.Range{Off: 9<<20 - 10, Len: -1}, v)
	if err == nil || !strings.Contains(err.Error(), "origin ignores Range requests") {
		t.Fatalf("off 9 MiB: %d bytes, %v", len(data), err)
	}
}

func TestShortBody(t *testing.T) {
	o := newTestOrigin(t)
	f := o.add("/a.bin", 3, 100000)
	o.behave.Store(behaveShort)
	s := newSource(t, o.URL+"/")
	data, _, err := readAll(t, s, "a.bin", source.Range{Off: 1000, Len: 10000}, f.version())
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short body: %d bytes, %v", len(data), err)
	}
	if err := pattern.Verify(3, data, 1000); err != nil {
		t.Fatal(err)
	}
	var pe *source.PathError
	if !errors.As(err, &pe) || pe.Off != 1000+int64(len(data)) {
		t.Fatalf("error %v does not carry the offset", err)
	}
}

func TestWrongStart(t *testing.T) {
	o := newTestOrigin(t)
	f := o.add("/a.bin", 3, 100000)
	o.behave.Store(behaveWrongStart)
	s := newSource(t, o.URL+"/")
	_, _, err := readAll(t, s, "a.bin", source.Range{Off: 1000, Len: 10}, f.version())
	if err == nil || errors.Is(err, source.ErrChanged) || !strings.Contains(err.Error(), "from 1001") {
		t.Fatalf("wrong start: %v", err)
	}
}

func TestConnectionReuse(t *testing.T) {
	o := newTestOrigin(t)
	f := o.add("/a.bin", 3, 1<<20)
	s := newSource(t, o.URL+"/")
	for i := range 3 {
		data, _, err := readAll(t, s, "a.bin", source.Range{Off: int64(i) * 100000, Len: 100000}, f.version())
		if err != nil || len(data) != 100000 {
			t.Fatalf("range %d: %d bytes, %v", i, len(data), err)
		}
	}
	// Ranges read to the end give their connection back: none is closed.
	time.Sleep(20 * time.Millisecond)
	if n := o.closedConns.Load(); n != 0 {
		t.Fatalf("three sequential ranges read fully closed %d connections, want 0", n)
	}

	// A body closed early costs its connection; Warm opens the next one ahead of time.
	b, err := s.OpenRange(context.Background(), "a.bin", source.Range{Off: 0, Len: -1}, f.version())
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(b, make([]byte, 10))
	b.Close()
	// The range's answer started a background warm-up (spare.go); one in flight holds a
	// connection, and the range below would dial beside it.
	waitNotWarming(t, s)
	if err := s.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	requested := time.Now()
	if _, _, err := readAll(t, s, "a.bin", source.Range{Off: 0, Len: 10}, f.version()); err != nil {
		t.Fatal(err)
	}
	if !o.lastGetConnectedBefore(requested) {
		t.Fatal("range after Warm arrived on a new connection")
	}
}

// waitNotWarming waits until no background warm-up of s is in flight.
func waitNotWarming(t *testing.T, s *Source) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.spare.Warming() {
		if time.Now().After(deadline) {
			t.Fatal("a background warm-up is still in flight after 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCloseAbortsRead(t *testing.T) {
	o := newTestOrigin(t)
	f := o.add("/a.bin", 3, 1<<20)
	o.behave.Store(behaveStall)
	s := newSource(t, o.URL+"/")
	b, err := s.OpenRange(context.Background(), "a.bin", source.Range{Off: 0, Len: 1 << 20}, f.version())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(b, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(20*time.Millisecond, func() { b.Close() })
	done := make(chan error, 1)
	go func() {
		_, err := b.Read(make([]byte, 100))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || err == io.EOF {
			t.Fatalf("Read after Close = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not abort a blocked Read")
	}
	b.Close()

	// Cancelling the ctx aborts too.
	ctx, cancel := context.WithCancel(context.Background())
	b, err = s.OpenRange(ctx, "a.bin", source.Range{Off: 0, Len: 1 << 20}, f.version())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	io.ReadFull(b, make([]byte, 100))
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := b.Read(make([]byte, 100)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after cancel = %v", err)
	}
}

// A caller that reads exactly the range's bytes and closes (as the fetcher does, block by
// block) must leave the connection in the pool.
func TestExactReadKeepsConnection(t *testing.T) {
	o := newTestOrigin(t)
	f := o.add("/a.bin", 3, 1<<20)
	s := newSource(t, o.URL+"/")
	for i := range 3 {
		b, err := s.OpenRange(context.Background(), "a.bin", source.Range{Off: int64(i) * 65536, Len: 65536}, f.version())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(b, make([]byte, 65536)); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	// No connection was given up (a discarded one is closed by the client).
	time.Sleep(20 * time.Millisecond)
	if n := o.closedConns.Load(); n != 0 {
		t.Fatalf("three exactly-read ranges closed %d connections, want 0", n)
	}
}

// While one range holds a connection, a spare is dialed ahead, so the next range starts
// without a handshake.
func TestSpareConnectionIsReady(t *testing.T) {
	o := newTestOrigin(t)
	f := o.add("/a.bin", 3, 1<<20)
	s := newSource(t, o.URL+"/")
	b1, err := s.OpenRange(context.Background(), "a.bin", source.Range{Off: 0, Len: -1}, f.version())
	if err != nil {
		t.Fatal(err)
	}
	defer b1.Close()
	// Wait for the warm-up to finish: two connections, one of them idle.
	deadline := time.Now().Add(2 * time.Second)
	for (o.newConns.Load() < 2 || s.spare.Warming()) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := o.newConns.Load(); n < 2 {
		t.Fatalf("no spare connection warmed: %d connections", n)
	}
	time.Sleep(50 * time.Millisecond) // the warm-up's connection goes back to the pool
	requested := time.Now()
	b2, err := s.OpenRange(context.Background(), "a.bin", source.Range{Off: 1000, Len: 1000}, f.version())
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, b2)
	b2.Close()
	if !o.lastGetConnectedBefore(requested) {
		t.Fatal("second range dialed a connection although a spare was ready")
	}
}
