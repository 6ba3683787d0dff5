package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"sync"
	"time"

	"github.com/playhead/playhead/bench/report"
	"github.com/playhead/playhead/bench/scenario"
)

// Ceilings are the limits the systems under test are read against: what a plain HTTP
// client gets from the link with one connection and with ParallelConns, and what the
// disk gives when the origin's file is read locally. They are not filesystems: the HTTP
// ones read the way the scenario is known to read (a client that knows the access
// pattern needs no read-ahead policy), in this process, and apply only where that
// stands for a limit.

// ParallelConns is the parallel ceiling's connection count: 16 range requests at once,
// as many as download accelerators and rclone's --multi-thread-streams ceiling use, and
// enough to fill a link whose connections are capped (the cloud profile's 25 MB/s each).
const ParallelConns = 16

// parallelChunk is the size of each of the parallel ceiling's range requests: big
// enough that a request's round trip is small next to its transfer on every link, small
// enough that ParallelConns of them in flight fit in memory twice over.
const parallelChunk = 4 << 20

// parallelAhead is how many chunks the parallel reader may hold beyond the one being
// read: ParallelConns in flight plus as many waiting, so a reader that pauses does not
// stall the connections.
const parallelAhead = 2 * ParallelConns

// ceilingMode is how an HTTP ceiling reads a scenario.
type ceilingMode int

const (
	modeNone     ceilingMode = iota
	modeStream               // one open-ended GET from the first offset, read as a stream
	modeRanges               // each read is one bounded range request on a kept-alive connection
	modeParallel             // parallelChunk ranges, ParallelConns at once, delivered in order
)

// Reasons a ceiling has no figures for a scenario, for the report's legend.
const (
	whyNoStreamsCeiling     = "eight players need eight connections: the http conn per player column is their ceiling"
	whyNoShuffledCeiling    = "out-of-order reads from four threads need a read-ahead engine to become one stream; play 20MB/s is their sequential ceiling"
	whyNoRewatchCeiling     = "rewatch measures a system's own cache; a plain HTTP client keeps none"
	whyParallelOnlyBulk     = "parallel ranges raise a copy's or one fast player's throughput; a seek, a probing scanner or players sharing the link gain nothing from 16 connections"
	whyPerPlayerOnlyStreams = "one connection per player stands for a limit only where several players share the link (streams)"
	whyNoPlayersCeiling     = "a real player opens files by path; a plain HTTP client is no directory (local disk is the players' reference)"
)

// HTTPOneConnSystem is the one-connection link ceiling.
func HTTPOneConnSystem() System {
	// seek reads each chunk with a bounded range of its own on the kept-alive connection:
	// the first chunk after a seek is one request of 256 KiB, the floor of the time to
	// the first 256 KiB that a mount can reach with one connection per read.
	modes := map[string]ceilingMode{"play": modeStream, "bulk": modeStream, "thumbs": modeRanges, "seek": modeRanges}
	why := map[string]string{"streams": whyNoStreamsCeiling,
		"shuffled": whyNoShuffledCeiling, "rewatch": whyNoRewatchCeiling, "players": whyNoPlayersCeiling}
	return System{
		Info: report.System{Name: "http 1 conn", Kind: report.KindCeiling,
			Command: "Go net/http, one kept-alive connection: play and bulk one open-ended GET read as a stream, thumbs one bounded range per probe, seek one bounded range per 256 KiB read",
			Note:    "the link's limit for one connection; no cache, no daemon (no RSS or CPU)"},
		SUT:    &httpCeiling{conns: 1, modes: modes},
		NotFor: notFor(modes, why),
	}
}

// HTTPParallelSystem is the link ceiling with ParallelConns range requests at once. It
// reads play too: where one connection carries less than a fast player's rate (a long
// link whose sender's buffer is under the bandwidth-delay product), what sixteen
// connections dialed before the case give a player from its first byte is the least any
// read-ahead can freeze, TCP's slow start included.
func HTTPParallelSystem() System {
	modes := map[string]ceilingMode{"bulk": modeParallel, "play": modeParallel}
	return System{
		Info: report.System{Name: fmt.Sprintf("http %d conns", ParallelConns), Kind: report.KindCeiling,
			Command: fmt.Sprintf("Go net/http, %d connections dialed before the case: %d MiB ranges, %d in flight from the first byte, each delivered in order as it arrives", ParallelConns, parallelChunk>>20, ParallelConns),
			Note:    "the link's limit; bulk and play only"},
		SUT:    &httpCeiling{conns: ParallelConns, modes: modes},
		NotFor: onlyFor(modes, whyParallelOnlyBulk),
	}
}

// HTTPPerPlayerSystem is the streams scenario's link ceiling: each player reads its file
// as one open-ended GET on a connection of its own, dialed before the case starts (one
// per file of the case). No read-ahead engine stands between the players and the link:
// each gets what TCP's congestion control gives its flow, so on a kernel-shaped link its
// freezes are what sharing that link costs a client that never reconnects and never
// asks for more than it reads.
func HTTPPerPlayerSystem() System {
	modes := map[string]ceilingMode{"streams": modeStream}
	return System{
		Info: report.System{Name: "http conn per player", Kind: report.KindCeiling,
			Command: "Go net/http, a kept-alive connection per file of the case: each player one open-ended GET read as a stream",
			Note:    "the shared link's limit for several players, one TCP flow each; streams only"},
		SUT:    &httpCeiling{perFile: true, modes: modes},
		NotFor: onlyFor(modes, whyPerPlayerOnlyStreams),
	}
}

// LocalDiskSystem is the disk's ceiling: the origin's own files read from disk (the
// page cache dropped after "mount", as for every system), through the same scenarios.
func LocalDiskSystem() System {
	return System{
		Info: report.System{Name: "local disk", Kind: report.KindCeiling,
			Command: "os.DirFS of the origin's files on this disk",
			Note:    "the disk's limit; no network, no daemon (origin counters are 0; no RSS or CPU); bulk's second read is the page cache"},
		SUT:        localCeiling{},
		NeedsFiles: true,
	}
}

// onlyFor is NotFor for a ceiling that applies only to the scenarios of modes: every
// other scenario has reason.
func onlyFor(modes map[string]ceilingMode, reason string) func(string) string {
	return func(sc string) string {
		if modes[sc] == modeNone {
			return reason
		}
		return ""
	}
}

func notFor(modes map[string]ceilingMode, why map[string]string) func(string) string {
	return func(sc string) string {
		if modes[sc] != modeNone {
			return ""
		}
		if w := why[sc]; w != "" {
			return w
		}
		return "no plain-client reading stands for a limit here"
	}
}

// localCeiling "mounts" the origin's files directory.
type localCeiling struct{}

func (localCeiling) Mount(_ context.Context, req MountRequest) (Mounted, error) {
	if req.FilesDir == "" {
		return nil, errors.New("local disk: the origin's files were not written to disk")
	}
	fsys := os.DirFS(req.FilesDir)
	if _, err := fs.Stat(fsys, req.ReadyFile); err != nil {
		return nil, fmt.Errorf("local disk: %w", err)
	}
	return noDaemon{fsys, req.FilesDir}, nil
}

// noDaemon is a Mounted with nothing to stop and no process of its own: a directory
// of this machine.
type noDaemon struct {
	fsys fs.FS
	dir  string
}

func (m noDaemon) FS() fs.FS                   { return m.fsys }
func (m noDaemon) Dir() string                 { return m.dir }
func (m noDaemon) PeakRSS() (int64, error)     { return 0, ErrNoDaemon }
func (m noDaemon) CPU() (time.Duration, error) { return 0, ErrNoDaemon }
func (m noDaemon) Unmount() error              { return nil }

// httpCeiling reads the origin over the link with a plain HTTP client.
type httpCeiling struct {
	conns   int
	perFile bool // conns is the case's file count: a connection for each player
	modes   map[string]ceilingMode
}

func (c *httpCeiling) Mount(ctx context.Context, req MountRequest) (Mounted, error) {
	mode := c.modes[req.Scenario]
	if mode == modeNone {
		return nil, fmt.Errorf("http ceiling: no reading for scenario %q", req.Scenario)
	}
	conns := c.conns
	if c.perFile {
		conns = max(len(req.Files), 1)
	}
	tr := &http.Transport{
		MaxConnsPerHost:     conns,
		MaxIdleConnsPerHost: conns,
		DisableCompression:  true,
	}
	client := &http.Client{Transport: tr}
	fsys := &httpFS{client: client, base: req.OriginURL, bucket: req.Bucket, sizes: req.Files, mode: mode}
	if err := fsys.dial(ctx, req.ReadyFile, conns); err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("http ceiling: %w", err)
	}
	return &httpMount{fsys: fsys, tr: tr}, nil
}

// dial opens n connections before the runner starts counting, as a warm client would
// have them: n concurrent one-byte GETs of name, each body held open until all have
// answered. A connection whose body is unread is not back in the pool, so no request
// can reuse another's connection and each dials its own (a HEAD's connection is free
// the moment it answers, and a HEAD that starts late would take it).
func (h *httpFS) dial(ctx context.Context, name string, n int) error {
	var answered, wg sync.WaitGroup
	answered.Add(n)
	release := make(chan struct{})
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			resp, err := h.get(ctx, name, 0, 1)
			answered.Done()
			if err != nil {
				errs[i] = err
				return
			}
			<-release
			_, errs[i] = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	answered.Wait()
	close(release)
	wg.Wait()
	return errors.Join(errs...)
}

type httpMount struct {
	fsys *httpFS
	tr   *http.Transport
}

func (m *httpMount) FS() fs.FS                   { return m.fsys }
func (m *httpMount) PeakRSS() (int64, error)     { return 0, ErrNoDaemon }
func (m *httpMount) CPU() (time.Duration, error) { return 0, ErrNoDaemon }
func (m *httpMount) Unmount() error {
	m.tr.CloseIdleConnections()
	return nil
}

// httpFS is the case's files over HTTP; sizes are known (a client that has the listing).
// From a bucket (--origin s3) it reads presigned URLs, through the same link.
type httpFS struct {
	client *http.Client
	base   string
	bucket *Bucket // nil: the files are at base+name
	sizes  map[string]int64
	mode   ceilingMode
}

// url is where a plain client sends method for the file at name.
func (h *httpFS) url(ctx context.Context, method, name string) (string, error) {
	if h.bucket != nil {
		return h.bucket.ObjectURL(ctx, method, name)
	}
	return h.base + name, nil
}

var _ scenario.Uncached = (*httpFS)(nil)

// Uncached implements scenario.Uncached.
func (*httpFS) Uncached() {}

func (h *httpFS) Open(name string) (fs.File, error) {
	size, ok := h.sizes[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	f := &httpFile{fs: h, name: name, size: size}
	if h.mode == modeParallel {
		f.par = newParallelReader(h, name, size)
	}
	return f, nil
}

func (h *httpFS) Stat(name string) (fs.FileInfo, error) {
	size, ok := h.sizes[name]
	if !ok {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return fileInfo{name: path.Base(name), size: size}, nil
}

// get issues a GET of [off, end) of name (end < 0: to the end of the file).
func (h *httpFS) get(ctx context.Context, name string, off, end int64) (*http.Response, error) {
	url, err := h.url(ctx, http.MethodGet, name)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if end < 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", off))
	} else {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, end-1))
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusPartialContent {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s at %d: %s", name, off, resp.Status)
	}
	return resp, nil
}

// httpFile is one open file of an httpFS. Its methods are safe for one reader at a time,
// which is how the scenarios a ceiling applies to read.
type httpFile struct {
	fs   *httpFS
	name string
	size int64
	pos  int64 // Read's offset

	body    io.ReadCloser // modeStream: the open response, positioned at bodyOff
	bodyOff int64

	par *parallelReader // modeParallel
}

func (f *httpFile) Stat() (fs.FileInfo, error) {
	return fileInfo{name: path.Base(f.name), size: f.size}, nil
}

func (f *httpFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *httpFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= f.size {
		return 0, io.EOF
	}
	want := p[:min(int64(len(p)), f.size-off)]
	var n int
	var err error
	switch f.fs.mode {
	case modeStream:
		n, err = f.readStream(want, off)
	case modeRanges:
		n, err = f.readRange(want, off)
	case modeParallel:
		n, err = f.par.readAt(want, off)
	}
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// readStream reads from the open response when it is at off, or opens a new one there.
func (f *httpFile) readStream(p []byte, off int64) (int, error) {
	if f.body != nil && f.bodyOff != off {
		f.body.Close()
		f.body = nil
	}
	if f.body == nil {
		resp, err := f.fs.get(context.Background(), f.name, off, -1)
		if err != nil {
			return 0, err
		}
		f.body, f.bodyOff = resp.Body, off
	}
	n, err := io.ReadFull(f.body, p)
	f.bodyOff += int64(n)
	if err != nil {
		return n, fmt.Errorf("%s at %d: %w", f.name, off+int64(n), err)
	}
	return n, nil
}

func (f *httpFile) readRange(p []byte, off int64) (int, error) {
	resp, err := f.fs.get(context.Background(), f.name, off, off+int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.ReadFull(resp.Body, p)
	if err != nil {
		return n, fmt.Errorf("%s at %d: %w", f.name, off+int64(n), err)
	}
	return n, nil
}

func (f *httpFile) Close() error {
	if f.body != nil {
		f.body.Close()
	}
	if f.par != nil {
		f.par.close()
	}
	return nil
}

// parallelReader downloads a file as parallelChunk ranges on ParallelConns workers and
// hands them to one sequential reader in order. A chunk's bytes reach the reader as they
// arrive, not when the whole chunk has: the reader of the first chunk waits for its
// first bytes only, as a player's first frame would, while the other workers fill the
// chunks after it. So the ceiling is the link's and TCP's (each connection's slow start),
// not the chunk size's.
type parallelReader struct {
	fs     *httpFS
	name   string
	size   int64
	ctx    context.Context
	cancel context.CancelFunc

	next   chan int      // chunk indexes for the workers, in order
	slots  chan struct{} // one per chunk allowed ahead of the reader
	parts  []*part       // each chunk, filled by one worker
	curIdx int           // the chunk the reader is in; its slot is released
	wg     sync.WaitGroup
}

// part is one chunk being filled. Invariant: data[:n] are the file's bytes from the
// chunk's offset; n only grows, and err is set at most once, when n stops growing short
// of the chunk's end.
type part struct {
	mu   sync.Mutex
	cond *sync.Cond
	data []byte
	n    int
	err  error
}

func newParallelReader(h *httpFS, name string, size int64) *parallelReader {
	n := int((size + parallelChunk - 1) / parallelChunk)
	ctx, cancel := context.WithCancel(context.Background())
	r := &parallelReader{fs: h, name: name, size: size, ctx: ctx, cancel: cancel,
		next: make(chan int), slots: make(chan struct{}, parallelAhead), parts: make([]*part, n), curIdx: -1}
	for i := range r.parts {
		r.parts[i] = &part{}
		r.parts[i].cond = sync.NewCond(&r.parts[i].mu)
	}
	go func() { // hands out chunk indexes as slots free up
		defer close(r.next)
		for i := range n {
			select {
			case r.slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case r.next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	for range ParallelConns {
		r.wg.Go(func() {
			for i := range r.next {
				off := int64(i) * parallelChunk
				r.fill(r.parts[i], off, min(off+parallelChunk, size))
			}
		})
	}
	return r
}

// fill reads [off, end) into p, publishing each read as it lands.
func (r *parallelReader) fill(p *part, off, end int64) {
	fail := func(err error) {
		p.mu.Lock()
		p.err = err
		p.cond.Broadcast()
		p.mu.Unlock()
	}
	resp, err := r.fs.get(r.ctx, r.name, off, end)
	if err != nil {
		fail(err)
		return
	}
	defer resp.Body.Close()
	data := make([]byte, end-off)
	p.mu.Lock()
	p.data = data
	p.mu.Unlock()
	got := 0
	for got < len(data) {
		// Only this worker writes data[got:], and the reader reads only data[:n].
		k, err := resp.Body.Read(data[got:])
		got += k
		p.mu.Lock()
		p.n = got
		p.cond.Broadcast()
		p.mu.Unlock()
		if err != nil && got < len(data) {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			fail(fmt.Errorf("%s at %d: %w", r.name, off+int64(got), err))
			return
		}
	}
}

// readAt reads sequentially only (bulk's and play's reader); it may span chunks, and
// returns as soon as p is full, whatever the rest of its chunk.
func (r *parallelReader) readAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		o := off + int64(n)
		idx := int(o / parallelChunk)
		if idx != r.curIdx {
			if idx != r.curIdx+1 {
				return n, fmt.Errorf("parallel ceiling: %s read at %d out of order", r.name, o)
			}
			if r.curIdx >= 0 {
				r.parts[r.curIdx] = nil // read: let it go
			}
			r.curIdx = idx
			<-r.slots
		}
		k, err := r.parts[idx].copyAt(p[n:], int(o-int64(idx)*parallelChunk))
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// copyAt waits until the part has bytes at at (or has failed) and copies what it has.
func (pt *part) copyAt(p []byte, at int) (int, error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	for pt.n <= at && pt.err == nil {
		pt.cond.Wait()
	}
	if pt.n <= at {
		return 0, pt.err
	}
	return copy(p, pt.data[at:pt.n]), nil
}

// close stops the workers; a worker's canceled request fails its part, so no reader of
// this file can wait on it (and the file's only reader is the one closing it).
func (r *parallelReader) close() {
	r.cancel()
	r.wg.Wait()
}

// fileInfo is a read-only file's or directory's fs.FileInfo.
type fileInfo struct {
	name string
	size int64
	dir  bool
}

func (i fileInfo) Name() string { return i.name }
func (i fileInfo) Size() int64  { return i.size }
func (i fileInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.dir }
func (i fileInfo) Sys() any           { return nil }
