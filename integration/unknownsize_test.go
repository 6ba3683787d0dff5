package integration

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/playhead/playhead/internal/testlog"
	"github.com/playhead/playhead/origin"
)

// chunkedOrigin is the built-in origin as a CDN or object gateway that streams
// everything chunked: its listing gives no sizes, and no answer carries Content-Length.
// Files named "nototal*" also withhold the Content-Range total ("bytes 0-0/*"), so
// nothing tells their size.
type chunkedOrigin struct {
	o     *origin.Server
	names []string
}

func (c *chunkedOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/" {
		var b bytes.Buffer
		b.WriteString("[")
		for i, n := range c.names {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"name":%q,"type":"file"}`, n)
		}
		b.WriteString("]")
		w.Header().Set("Content-Type", "application/json")
		w.Write(b.Bytes())
		return
	}
	c.o.ServeHTTP(&noLengthWriter{ResponseWriter: w, noTotal: strings.HasPrefix(path.Base(r.URL.Path), "nototal")}, r)
}

// noLengthWriter drops Content-Length (and with noTotal the Content-Range total) from
// the answer's headers.
type noLengthWriter struct {
	http.ResponseWriter
	noTotal bool
}

func (n *noLengthWriter) WriteHeader(code int) {
	h := n.Header()
	h.Del("Content-Length")
	if cr := h.Get("Content-Range"); n.noTotal && cr != "" {
		if i := strings.LastIndexByte(cr, '/'); i >= 0 {
			h.Set("Content-Range", cr[:i+1]+"*")
		}
	}
	n.ResponseWriter.WriteHeader(code)
}

// logBuffer collects a logger's output for a test to search.
type logBuffer struct{ testlog.Buffer }

// count returns how often s occurs.
func (l *logBuffer) count(s string) int { return strings.Count(l.String(), s) }

// unknownSizeLog is in the one line vfs logs when it refuses a file of unknown size.
const unknownSizeLog = "the origin gives no size for this file"

// checkRefused wants the file at p listed, its open failing with EIO, and exactly one
// log line saying why.
func checkRefused(t *testing.T, p string, logs *logBuffer) {
	t.Helper()
	if _, err := os.Stat(p); err != nil {
		t.Errorf("stat of a file of unknown size: %v; want it listed", err)
	}
	before := logs.count(unknownSizeLog)
	f, err := os.Open(p)
	if err == nil {
		f.Close()
		t.Fatalf("open of a file of unknown size succeeded")
	}
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("open of a file of unknown size: %v, want EIO", err)
	}
	if n := logs.count(unknownSizeLog) - before; n != 1 {
		t.Errorf("refusing the open logged %d lines %q, want 1", n, unknownSizeLog)
	}
}

// A file whose size neither the listing nor HEAD gives (chunked answers): its size is
// learned from a ranged GET's Content-Range total and it reads right to its end; when
// the origin gives no total either, it is listed but refused at open with one log line,
// never a panic. Through the mount, with the built-in origin.
func TestUnknownSizeThroughMount(t *testing.T) {
	const size, seed = 3<<20 + 5, 31
	names := []string{"a.bin", "nototal.bin"}
	o := origin.New(origin.Options{Files: map[string]origin.File{"a.bin": {Seed: seed, Size: size}, "nototal.bin": {Seed: seed, Size: 1 << 20}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: &chunkedOrigin{o: o, names: names}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	base := "http://" + ln.Addr().String() + "/"

	resp, err := http.Head(base + "a.bin")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ContentLength >= 0 {
		t.Fatalf("the chunked origin sent Content-Length %d: the test tests nothing", resp.ContentLength)
	}

	t.Run("directory", func(t *testing.T) {
		var logs logBuffer
		opts := testOptions(t)
		opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		m := mountHTTP(t, base, opts)
		// A file of unknown size is listed with size 0.
		want := []string{fmt.Sprintf("a.bin %d", size), "nototal.bin 0"}
		if got := listing(t, m.Dir); !slices.Equal(got, want) {
			t.Errorf("listing %q, want %q", got, want)
		}
		st, err := os.Stat(m.Path("a.bin"))
		if err != nil || st.Size() != size {
			t.Fatalf("stat a.bin: %v, %v; want size %d", st, err, size)
		}
		verifyWhole(t, m.Path("a.bin"), seed, size)
		checkRefused(t, m.Path("nototal.bin"), &logs)
	})
	t.Run("single file", func(t *testing.T) {
		var logs logBuffer
		opts := testOptions(t)
		opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		m := mountHTTP(t, base+"a.bin", opts)
		verifyWhole(t, m.Path("a.bin"), seed, size)
		opts.Cache.Dir = t.TempDir() // one cache per mount
		m2 := mountHTTP(t, base+"nototal.bin", opts)
		checkRefused(t, m2.Path("nototal.bin"), &logs)
	})
	figure(t, "chunked origin (no Content-Length): a %d-byte file sized from the Content-Range total reads right "+
		"(directory and single-file mounts); one without a total is listed, open is EIO with one log line", size)
}

// The same with nginx answering chunked (sub_filter drops Content-Length and Range
// support): a file its HTML index lists with a size reads right to its end, through
// answers that ignore the range; the same file mounted alone, where nothing gives its
// size, is listed but refused at open with one log line.
func TestUnknownSizeNginxChunked(t *testing.T) {
	const p = "chunked/x.bin"
	const size = 300<<10 + 3
	htmlURL, _ := startNginx(t, map[string]int64{p: size})
	resp, err := http.Head(htmlURL + p)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ContentLength >= 0 {
		t.Fatalf("nginx sent Content-Length %d under /chunked/: the config does not test chunked answers", resp.ContentLength)
	}
	var logs logBuffer
	opts := testOptions(t)
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	m := mountHTTP(t, htmlURL+"chunked/", opts)
	verifyWhole(t, m.Path("x.bin"), seedOf(p), size)

	opts.Cache.Dir = t.TempDir() // one cache per mount
	one := mountHTTP(t, htmlURL+p, opts)
	checkRefused(t, one.Path("x.bin"), &logs)
	figure(t, "nginx answering chunked (sub_filter): listed file of %d bytes reads right through range-ignoring answers; "+
		"mounted alone (no size anywhere) it is listed, open is EIO with one log line", size)
}
