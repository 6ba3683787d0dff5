package linkemu

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pattern"
)

// Real time is unavoidable for a proxy: these tests use a short round trip and a modest
// rate so each takes well under a few seconds, and tolerances that survive a loaded
// 2-core machine while still failing if the model is wrong.
const (
	testRTT  = 50 * time.Millisecond
	testRate = 20_000_000 // bytes/s
	testSeed = 7

	// ttfbSlack is how late a first byte may be beyond the model: timer wake-ups, the
	// HTTP round trip on loopback and the race detector.
	ttfbSlack = 60 * time.Millisecond
	// queueSlack is the same for a test that must tell apart queues 13 ms apart.
	queueSlack = 12 * time.Millisecond
	// Rate tolerances: the model is exact to a chunk, so 10% above means a broken cap;
	// 40% below allows for a scheduler busy with other work (a CPU hog on one of the two
	// cores measured 0.70x), while a cap applied twice or a stalled pipe still fails.
	rateLow, rateHigh = 0.6, 1.1
)

// origin serves a pattern file of size bytes and counts the bytes its handler wrote. The
// file is made once and served from memory: under the race detector, generating it per
// request costs enough CPU on 2 cores to make the link look slow.
type origin struct {
	*httptest.Server
	data    []byte
	written atomic.Int64
}

func newOrigin(t *testing.T, size int64) *origin {
	t.Helper()
	o := &origin{data: make([]byte, size)}
	pattern.Fill(testSeed, o.data, 0)
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(countingWriter{w, &o.written}, r, "file", time.Time{}, bytes.NewReader(o.data))
	}))
	t.Cleanup(o.Close)
	return o
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// startLink puts a link with opts in front of o and returns it and its base URL.
func startLink(t *testing.T, o *origin, opts Options) (*Link, string) {
	t.Helper()
	l, err := New(strings.TrimPrefix(o.URL, "http://"), opts)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := l.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, "http://" + addr + "/file"
}

func testOptions() Options {
	return Options{RTT: testRTT, Bandwidth: testRate, HandshakeRTTs: 1}
}

func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// fetch is one timed GET.
type fetch struct {
	start time.Time     // request sent
	ttfb  time.Duration // request to response headers
	bytes int64
	end   time.Time // body read to EOF
	// quarter is when a quarter of the body had arrived, for steadyRate.
	quarter time.Time
}

// steadyRate is the rate over the last three quarters of the body: whatever a busy
// scheduler did to the first chunks (delivered late, then in a burst) is left out.
func (f fetch) steadyRate() float64 {
	return float64(f.bytes-f.bytes/4) / f.end.Sub(f.quarter).Seconds()
}

// rate is the body's rate from when the model says its first byte can arrive (modelTTFB
// after the request) to its last byte. Timing from the observed first byte instead would
// overstate the rate whenever a busy scheduler delivered the first chunk late and the
// rest on time.
func (f fetch) rate(modelTTFB time.Duration) float64 {
	return float64(f.bytes) / f.end.Sub(f.start.Add(modelTTFB)).Seconds()
}

// get GETs [off, off+n) of o's file through url, checks the bytes and times it.
func (o *origin) get(t *testing.T, c *http.Client, url string, off, n int64) fetch {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.Error(err)
		return fetch{}
	}
	defer resp.Body.Close()
	headers := time.Now()
	buf := make([]byte, 64<<10)
	var got int64
	var quarter time.Time
	for {
		k, err := resp.Body.Read(buf)
		if k > 0 {
			if at := off + got; !bytes.Equal(buf[:k], o.data[at:at+int64(k)]) {
				t.Errorf("wrong bytes in [%d, %d)", at, at+int64(k))
				return fetch{}
			}
			got += int64(k)
			if quarter.IsZero() && got >= n/4 {
				quarter = time.Now()
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Error(err)
			return fetch{}
		}
	}
	end := time.Now()
	if got != n {
		t.Errorf("got %d bytes, want %d", got, n)
	}
	return fetch{start: start, ttfb: headers.Sub(start), bytes: got, end: end, quarter: quarter}
}

func checkTTFB(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	t.Logf("%s: ttfb %v (model %v)", what, got, want)
	if got < want || got > want+ttfbSlack {
		t.Errorf("%s: ttfb %v, want %v..%v", what, got, want, want+ttfbSlack)
	}
}

func checkRate(t *testing.T, what string, got, want float64) {
	t.Helper()
	t.Logf("%s: %.2f MB/s (%.3fx of %.1f MB/s)", what, got/1e6, got/want, want/1e6)
	if got < rateLow*want || got > rateHigh*want {
		t.Errorf("%s: %.2f MB/s, want %.2f..%.2f", what, got/1e6, rateLow*want/1e6, rateHigh*want/1e6)
	}
}

func TestRoundTripAndRate(t *testing.T) {
	const size = 10_000_000 // half a second at testRate
	o := newOrigin(t, size)
	l, url := startLink(t, o, testOptions())
	c := newClient(t)

	checkTTFB(t, "new connection", o.get(t, c, url, 0, 1).ttfb, 2*testRTT)
	checkTTFB(t, "reused connection", o.get(t, c, url, 1000, 100).ttfb, testRTT)
	f := o.get(t, c, url, 0, size)
	checkTTFB(t, "bulk GET", f.ttfb, testRTT)
	checkRate(t, "bulk GET", f.steadyRate(), testRate)
	checkRate(t, "bulk GET including its first byte", f.rate(testRTT), testRate)

	st := l.Stats()
	if st.Accepted != 1 {
		t.Errorf("accepted %d connections, want 1 (keep-alive)", st.Accepted)
	}
	if st.BytesDown < size || st.BytesUp == 0 {
		t.Errorf("stats %+v: want BytesDown >= %d and some BytesUp", st, size)
	}
}

func TestSharedCapIsSplit(t *testing.T) {
	const size = 6_000_000 // two of them: 0.6 s at testRate
	o := newOrigin(t, size)
	_, url := startLink(t, o, testOptions())

	var wg sync.WaitGroup
	fetches := make([]fetch, 2)
	start := time.Now()
	for i := range fetches {
		wg.Go(func() { fetches[i] = o.get(t, newClient(t), url, 0, size) })
	}
	wg.Wait()
	// Both are new connections: the model's first byte is two round trips after start.
	last := fetches[0].end
	if fetches[1].end.After(last) {
		last = fetches[1].end
	}
	both := fetch{start: start, bytes: 2 * size, end: last}
	checkRate(t, "aggregate", both.rate(2*testRTT), testRate)
	for i, f := range fetches {
		// Alone, each would run at testRate; shared, each gets about half.
		share := f.rate(2*testRTT) / testRate
		t.Logf("GET %d: %.2f MB/s (%.2f of the link)", i, f.rate(2*testRTT)/1e6, share)
		if share > 0.7 {
			t.Errorf("GET %d ran at %.2f of the link: the cap is not shared", i, share)
		}
	}
}

func TestSaturatedLinkQueuesLittle(t *testing.T) {
	const size = 16_000_000 // 0.8 s at testRate: saturating through all the probes
	o := newOrigin(t, size)
	_, url := startLink(t, o, testOptions())
	bulk, probe := newClient(t), newClient(t)
	o.get(t, probe, url, 0, 1) // connect now, so only queueing shows below

	done := make(chan struct{})
	go func() { defer close(done); o.get(t, bulk, url, 0, size) }()
	time.Sleep(150 * time.Millisecond) // bulk is mid-transfer, its window full
	// A small request beside a saturating stream waits behind at most the window beyond
	// the one-way BDP (which is in flight, not queued): 27 ms at testRate, where the
	// 1 MiB minimum window dominates. A full-RTT window would add another 13 ms.
	queue := time.Duration(float64(windowFor(testOptions())-testRate*testRTT.Nanoseconds()/2e9) / testRate * float64(time.Second))
	ttfb := minTTFB(t, o, probe, url, 3)
	t.Logf("beside a saturating GET: ttfb %v (model %v + queue up to %v)", ttfb, testRTT, queue)
	if ttfb < testRTT || ttfb > testRTT+queue+queueSlack {
		t.Errorf("ttfb %v beside a saturating GET, want %v..%v", ttfb, testRTT, testRTT+queue+queueSlack)
	}
	<-done
}

// minTTFB is the shortest time to first byte of n small GETs in a row: a queue in the
// link delays every one of them, a busy scheduler (the race detector on two cores) only
// some.
func minTTFB(t *testing.T, o *origin, c *http.Client, url string, n int) time.Duration {
	t.Helper()
	best := time.Duration(1<<63 - 1)
	for range n {
		best = min(best, o.get(t, c, url, 0, 100).ttfb)
	}
	return best
}

// Eight saturating GETs share the link: each keeps only its share's window in flight,
// so a small request beside them queues behind about eight small windows, not eight
// full ones (TCP flows sharing a bottleneck converge to their share).
func TestManySendersQueueLittle(t *testing.T) {
	const senders, size = 8, 4_000_000 // 1.6 s at testRate together, through all the probes
	o := newOrigin(t, size)
	_, url := startLink(t, o, testOptions())
	probe := newClient(t)
	o.get(t, probe, url, 0, 1) // connect now, so only queueing shows below

	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() { o.get(t, newClient(t), url, 0, size) })
	}
	time.Sleep(300 * time.Millisecond) // all mid-transfer, windows full
	inFlight := int64(testRate) * testRTT.Nanoseconds() / 2e9
	queue := time.Duration(float64(senders*minShareWindow-inFlight) / testRate * float64(time.Second))
	ttfb := minTTFB(t, o, probe, url, 3)
	t.Logf("beside %d saturating GETs: ttfb %v (model %v + queue up to %v)", senders, ttfb, testRTT, queue)
	// Four times the usual slack: nine connections' goroutines on two cores. With a full
	// window each, the queue alone would be about 400 ms.
	if limit := testRTT + queue + 4*queueSlack; ttfb > limit {
		t.Errorf("ttfb %v beside %d saturating GETs, want at most %v", ttfb, senders, limit)
	}
	wg.Wait()
}

func TestPerConnectionCap(t *testing.T) {
	const size, perConn = 4_000_000, 10_000_000 // 0.4 s each
	o := newOrigin(t, size)
	_, url := startLink(t, o, Options{RTT: testRTT, Bandwidth: 1_000_000_000, PerConnBandwidth: perConn})

	var wg sync.WaitGroup
	fetches := make([]fetch, 2)
	for i := range fetches {
		wg.Go(func() { fetches[i] = o.get(t, newClient(t), url, 0, size) })
	}
	wg.Wait()
	for i, f := range fetches {
		checkRate(t, fmt.Sprintf("GET %d", i), f.steadyRate(), perConn)
	}
}

func TestNoHandshakeCharge(t *testing.T) {
	o := newOrigin(t, 1000)
	opts := testOptions()
	opts.HandshakeRTTs = 0
	_, url := startLink(t, o, opts)
	checkTTFB(t, "new connection, no charge", o.get(t, newClient(t), url, 0, 10).ttfb, testRTT)
}

func TestBackpressureHoldsOrigin(t *testing.T) {
	const size = 50_000_000
	const readFirst = 1 << 20
	o := newOrigin(t, size)
	l, url := startLink(t, o, testOptions())
	readAndPause(t, url, readFirst)
	time.Sleep(time.Second) // the player pauses; at testRate the link could carry 20 MB

	// What may sit between the handler and our stopped reader: the proxy's window, the
	// kernel buffers on both loopback hops (the proxy's are capped, the client's and the
	// origin's autotune to a few MB) and the net/http buffers.
	written := o.written.Load()
	bound := readFirst + windowFor(l.Options()) + 8<<20
	t.Logf("origin wrote %.1f MB of %d MB while the client had read %.1f MB (bound %.1f MB, window %.2f MB)",
		float64(written)/1e6, size/1_000_000, float64(readFirst)/1e6, float64(bound)/1e6, float64(windowFor(l.Options()))/1e6)
	if written > int64(bound) {
		t.Errorf("origin wrote %d bytes; backpressure should hold it under %d", written, bound)
	}
	if written >= size {
		t.Error("origin wrote the whole body: the proxy slurped it")
	}
}

func TestCloseEndsConnections(t *testing.T) {
	o := newOrigin(t, 50_000_000)
	l, url := startLink(t, o, testOptions())
	resp, err := newClient(t).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if st := l.Stats(); st.Open != 1 || st.Accepted != 1 {
		t.Errorf("stats %+v, want 1 open of 1 accepted", st)
	}
	done := make(chan struct{})
	go func() { l.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung")
	}
	if _, err := io.Copy(io.Discard, resp.Body); err == nil {
		t.Error("body of a closed link read to the end without error")
	}
	if st := l.Stats(); st.Open != 0 {
		t.Errorf("%d connections open after Close", st.Open)
	}
}

func TestProbe(t *testing.T) {
	o := newOrigin(t, 8_000_000)
	_, url := startLink(t, o, testOptions())
	res, err := ProbeBytes(context.Background(), url, 8_000_000)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	checkTTFB(t, "probe connect", res.Connect, 2*testRTT)
	checkTTFB(t, "probe rtt", res.RTT, testRTT)
	checkRate(t, "probe", res.Throughput, testRate)
	if res.Bytes != 8_000_000 {
		t.Errorf("probe read %d bytes, want 8000000", res.Bytes)
	}
}

func TestLoopbackProfileProxies(t *testing.T) {
	o := newOrigin(t, 4_000_000)
	opts, err := Profile(ProfileLoopback)
	if err != nil {
		t.Fatal(err)
	}
	l, url := startLink(t, o, opts)
	f := o.get(t, newClient(t), url, 0, 4_000_000)
	t.Logf("loopback: ttfb %v, %.0f MB/s", f.ttfb, f.rate(0)/1e6)
	if f.ttfb > 50*time.Millisecond {
		t.Errorf("loopback ttfb %v: no delay expected", f.ttfb)
	}
	if st := l.Stats(); st.BytesDown < 4_000_000 {
		t.Errorf("stats %+v", st)
	}
}

func TestOptions(t *testing.T) {
	for _, name := range ProfileNames() {
		o, err := Profile(name)
		if err != nil || o.Validate() != nil {
			t.Errorf("profile %s: %v %v", name, err, o.Validate())
		}
	}
	if _, err := Profile("moon"); err == nil {
		t.Error("unknown profile accepted")
	}
	if d := DefaultOptions(); d.RTT != 200*time.Millisecond || d.Bandwidth != 30_000_000 || d.HandshakeRTTs != 1 {
		t.Errorf("DefaultOptions = %+v, want the far link", d)
	}
	if err := (Options{RTT: -1, Bandwidth: -1}).Validate(); err == nil {
		t.Error("negative options accepted")
	}
	if _, err := New("no-port", Options{}); err == nil {
		t.Error("target without port accepted")
	}
	// The window covers the one-way bandwidth-delay product so the link can run at its
	// rate, with a small queue.
	far := DefaultOptions()
	if w, bdp := windowFor(far), int64(30_000_000*0.1); w < bdp || w > bdp+windowSlack {
		t.Errorf("far window %d, want about one-way BDP %d", w, bdp)
	}
	if c := chunkFor(far); c < minChunk || c > maxChunk {
		t.Errorf("far chunk %d", c)
	}
	if w := windowFor(Options{RTT: time.Millisecond, Bandwidth: 1000}); w != minWindow {
		t.Errorf("small window %d, want minimum %d", w, minWindow)
	}
}

// TestFarProfile checks the accuracy target on the real "far" link: a 30 MB GET shows
// 400 ms to first byte on a new connection, 200 ms on a reused one, and 30 MB/s.
func TestFarProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("1.5 s of real time")
	}
	const size = 30_000_000
	opts, _ := Profile(ProfileFar)
	o := newOrigin(t, size)
	_, url := startLink(t, o, opts)
	c := newClient(t)

	checkTTFB(t, "far, new connection", o.get(t, c, url, 0, 1).ttfb, 2*opts.RTT)
	var before, after syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	f := o.get(t, c, url, 0, size)
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	checkTTFB(t, "far, reused connection", f.ttfb, opts.RTT)
	checkRate(t, "far, 30 MB", f.rate(opts.RTT), float64(opts.Bandwidth))
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	t.Logf("CPU for the 30 MB GET (origin, proxy and client together): %v over %v", cpu, f.end.Sub(f.start))
}

// A relay (Serve on the caller's listener, only a per-connection cap) paces each
// connection and leaves its client socket's buffers to the kernel: that socket is the
// sender on the real link behind it.
func TestServeRelayPacesAndKeepsClientBuffers(t *testing.T) {
	const size, perConn = 4_000_000, 10_000_000
	o := newOrigin(t, size)
	l, err := New(strings.TrimPrefix(o.URL, "http://"), Options{PerConnBandwidth: perConn})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr, err := l.Serve(ln)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if _, err := l.Start(""); err == nil {
		t.Error("Start after Serve succeeded")
	}
	f := o.get(t, newClient(t), "http://"+addr+"/file", 0, size)
	checkRate(t, "relayed GET", f.steadyRate(), perConn)
	if (Options{PerConnBandwidth: perConn}).carriesLink() || !(Options{RTT: time.Millisecond}).carriesLink() {
		t.Error("carriesLink: a per-connection cap alone does not carry the link; a delay does")
	}
}

// A relay in front of a real link holds what an origin's socket would: a client that
// stops reading stops the target within a window and the buffers, where a plain proxy
// took up to its 16 MiB window and autotuned loopback buffers more.
func TestRelayHoldsWhatASocketWould(t *testing.T) {
	const size = 50_000_000
	const readFirst = 1 << 20
	o := newOrigin(t, size)
	l, url := startLink(t, o, Options{Relay: true})
	if w := windowFor(l.Options()); w != minWindow {
		t.Fatalf("a relay's window is %d, want %d", w, minWindow)
	}

	readAndPause(t, url, readFirst)
	time.Sleep(300 * time.Millisecond) // loopback would carry the whole body in this time

	// The loopback socket pair to the client and net/http's buffers autotune as on any
	// client (8 to 10 MB here); the relay's own share is its window and its capped socket
	// towards the target. A plain proxy's 16 MiB window took the target to 25-27 MB.
	written := o.written.Load()
	bound := readFirst + windowFor(l.Options()) + 12<<20
	t.Logf("origin wrote %.1f MB while the client had read %.1f MB (bound %.1f MB)",
		float64(written)/1e6, float64(readFirst)/1e6, float64(bound)/1e6)
	if written > int64(bound) {
		t.Errorf("origin wrote %d bytes behind a relay; it should stop under %d", written, bound)
	}
}

// readAndPause GETs url and reads its first n bytes, then stops reading: the body stays
// open, unread, until the test ends.
func readAndPause(t *testing.T, url string, n int64) {
	t.Helper()
	resp, err := newClient(t).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if _, err := io.CopyN(io.Discard, resp.Body, n); err != nil {
		t.Fatal(err)
	}
}
