package origin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/internal/testlog"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/httpsrc"
)

func start(t *testing.T, opts Options) (*Server, string) {
	t.Helper()
	s := New(opts)
	url, err := s.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, url
}

func get(t *testing.T, url string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestRangesAndConditions(t *testing.T) {
	s, url := start(t, Options{Files: map[string]File{"movies/a.mkv": {Seed: 7, Size: 1 << 20}}})

	resp, body := get(t, url+"movies/a.mkv", map[string]string{"Range": "bytes=1000-1999"})
	if resp.StatusCode != http.StatusPartialContent || len(body) != 1000 || resp.Header.Get("Content-Range") != "bytes 1000-1999/1048576" {
		t.Fatalf("range: %s, %d bytes, %q", resp.Status, len(body), resp.Header.Get("Content-Range"))
	}
	if err := pattern.Verify(7, body, 1000); err != nil {
		t.Fatal(err)
	}
	etag0, lm0 := resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	if etag0 != `"7-1048576-0"` || lm0 != "Mon, 01 Jan 2024 00:00:00 GMT" {
		t.Fatalf("ETag %s, Last-Modified %s", etag0, lm0)
	}

	if err := s.Replace("movies/a.mkv"); err != nil {
		t.Fatal(err)
	}
	for _, h := range []map[string]string{
		{"Range": "bytes=0-9", "If-Match": etag0},
		{"Range": "bytes=0-9", "If-Unmodified-Since": lm0},
	} {
		if resp, _ := get(t, url+"movies/a.mkv", h); resp.StatusCode != http.StatusPreconditionFailed {
			t.Errorf("%v after Replace: %s", h, resp.Status)
		}
	}
	resp, body = get(t, url+"movies/a.mkv", map[string]string{"Range": "bytes=0-9", "If-Match": `"7-1048576-1"`})
	if resp.StatusCode != http.StatusPartialContent || pattern.Verify(Seed(7, 1), body, 0) != nil {
		t.Fatalf("new generation: %s", resp.Status)
	}
	if resp, _ := get(t, url+"movies/a.mkv", map[string]string{"Range": "bytes=2000000-"}); resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		t.Fatalf("past end: %s", resp.Status)
	}
	if resp, _ := get(t, url+"movies", nil); resp.Request.URL.Path != "/movies/" {
		t.Fatalf("directory without slash not redirected: %s", resp.Request.URL)
	}
	if resp, _ := get(t, url+"nope", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("missing: %s", resp.Status)
	}
	if s.Replace("nope") == nil {
		t.Fatal("Replace of a missing file succeeded")
	}
}

// acceptHTML makes httpsrc's listing requests ask for HTML only, to test that form.
type acceptHTML struct{ http.RoundTripper }

func (a acceptHTML) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Accept") != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Accept", "text/html")
	}
	return a.RoundTripper.RoundTrip(r)
}

func TestListingThroughHTTPSource(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "disk.txt"), []byte("on disk"), 0o644)
	os.Mkdir(filepath.Join(dir, "diskdir"), 0o755)
	files := map[string]File{
		"a.mkv":           {Seed: 1, Size: 123456789},
		"b c&d:e.mkv":     {Seed: 2, Size: 0},
		"sub/deep/x.bin":  {Seed: 3, Size: 5},
		"sub/y.bin":       {Seed: 4, Size: 6},
		"sub/z – ü.flac":  {Seed: 5, Size: 7},
		"shadow/disk.txt": {Seed: 6, Size: 8},
	}
	s, url := start(t, Options{Files: files, Dir: dir})
	s.Replace("sub/y.bin")
	ctx := context.Background()

	for _, html := range []bool{false, true} {
		opts := httpsrc.Options{}
		if html {
			opts.Client = &http.Client{Transport: acceptHTML{http.DefaultTransport}}
		}
		src, err := httpsrc.New(url, opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		var walk func(p string)
		walk = func(p string) {
			entries, err := src.List(ctx, p)
			if err != nil {
				t.Fatalf("List(%q): %v", p, err)
			}
			for _, e := range entries {
				full := strings.TrimPrefix(p+"/"+e.Name, "/")
				if e.IsDir {
					got = append(got, full+"/")
					walk(full)
					continue
				}
				got = append(got, full)
				st, err := src.Stat(ctx, full)
				if err != nil {
					t.Fatalf("Stat(%q): %v", full, err)
				}
				if e.Version.Size != st.Version.Size {
					t.Errorf("html=%v %q: listed size %d, Stat %d", html, full, e.Version.Size, st.Version.Size)
				}
				if !html && !e.Version.ModTime.Equal(st.Version.ModTime) {
					t.Errorf("%q: listed mtime %v, Stat %v", full, e.Version.ModTime, st.Version.ModTime)
				}
				if !e.Version.Matches(st.Version) {
					t.Errorf("%q: listing %v does not match Stat %v", full, e.Version, st.Version)
				}
				if f, ok := files[full]; ok && e.Version.Size != f.Size {
					t.Errorf("%q: size %d, want %d", full, e.Version.Size, f.Size)
				}
			}
		}
		walk("")
		sort.Strings(got)
		want := []string{"a.mkv", "b c&d:e.mkv", "disk.txt", "diskdir/", "shadow/", "shadow/disk.txt",
			"sub/", "sub/deep/", "sub/deep/x.bin", "sub/y.bin", "sub/z – ü.flac"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("html=%v: tree\n%q, want\n%q", html, got, want)
		}
	}
}

func TestChangedThroughHTTPSource(t *testing.T) {
	s, url := start(t, Options{Files: map[string]File{"a.bin": {Seed: 1, Size: 1000}}})
	src, _ := httpsrc.New(url, httpsrc.Options{})
	ctx := context.Background()
	e, err := src.Stat(ctx, "a.bin")
	if err != nil {
		t.Fatal(err)
	}
	s.Replace("a.bin")
	if _, err := src.OpenRange(ctx, "a.bin", source.Range{Off: 0, Len: 10}, e.Version); !errors.Is(err, source.ErrChanged) {
		t.Fatalf("old version: %v", err)
	}
	e2, _ := src.Stat(ctx, "a.bin")
	if !e2.Version.ModTime.After(e.Version.ModTime) {
		t.Fatalf("mtime did not move: %v then %v", e.Version, e2.Version)
	}
	b, err := src.OpenRange(ctx, "a.bin", source.Range{Off: 0, Len: -1}, e2.Version)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	data, err := io.ReadAll(b)
	if err != nil || pattern.Verify(Seed(1, 1), data, 0) != nil || len(data) != 1000 {
		t.Fatalf("new bytes: %d, %v", len(data), err)
	}
}

func TestStats(t *testing.T) {
	s, url := start(t, Options{Files: map[string]File{"a.bin": {Seed: 1, Size: 1 << 20}}})
	// A plain client, so the counts are exactly the requests made here (httpsrc also
	// warms spare connections).
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	s.ResetStats()
	var read int64
	for i := range 4 {
		req, _ := http.NewRequest(http.MethodGet, url+"a.bin", nil)
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", i*1000, i*1000+49999))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		read += n
	}
	st := s.Stats()
	if st.Requests != 4 || st.BytesWritten != read || read != 200000 || st.NewConns != 1 {
		t.Fatalf("Stats = %+v after reading %d bytes", st, read)
	}
	s.ResetStats()
	if st := s.Stats(); st != (Stats{}) {
		t.Fatalf("after reset: %+v", st)
	}
}

// The request log has a line per answered request with its range, status and the bytes
// written, so a run can tell which ranges the origin wrote that its client never read.
func TestRequestLog(t *testing.T) {
	var log testlog.Buffer
	_, url := start(t, Options{Files: map[string]File{"a.bin": {Seed: 1, Size: 1 << 20}}, RequestLog: &log})
	get(t, url+"a.bin", map[string]string{"Range": "bytes=100-50099"})
	get(t, url+"nope.bin", nil)
	// A line is written once the handler returns, which may be just after the client
	// has read the body.
	var lines []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if lines = strings.Split(strings.TrimSpace(log.String()), "\n"); len(lines) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	if len(lines) != 2 {
		t.Fatalf("request log:\n%s\nwant 2 lines", log.String())
	}
	for i, want := range []string{"GET /a.bin range=bytes=100-50099 status=206 written=50000 ", "GET /nope.bin range=- status=404 "} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d %q lacks %q", i, lines[i], want)
		}
	}
}

func TestDiskFile(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 5000)
	pattern.Fill(9, data, 0)
	os.WriteFile(filepath.Join(dir, "f.bin"), data, 0o644)
	mt := time.Date(2023, 5, 6, 7, 8, 9, 500, time.UTC)
	os.Chtimes(filepath.Join(dir, "f.bin"), mt, mt)
	_, url := start(t, Options{Dir: dir})
	resp, body := get(t, url+"f.bin", map[string]string{"Range": "bytes=100-199"})
	if resp.StatusCode != http.StatusPartialContent || pattern.Verify(9, body, 100) != nil || len(body) != 100 {
		t.Fatalf("disk range: %s, %d bytes", resp.Status, len(body))
	}
	if lm := resp.Header.Get("Last-Modified"); lm != "Sat, 06 May 2023 07:08:09 GMT" || resp.Header.Get("ETag") == "" {
		t.Fatalf("Last-Modified %q ETag %q", lm, resp.Header.Get("ETag"))
	}
	if resp, _ := get(t, url+"../../etc/passwd", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("escape: %s", resp.Status)
	}
}

// TestFileFromDisk: a File with a Path serves Size bytes of that file, with ranges and
// an ETag, and refuses Replace (its bytes have one version).
func TestFileFromDisk(t *testing.T) {
	data := []byte(strings.Repeat("0123456789", 1000))
	p := filepath.Join(t.TempDir(), "clip.mp4")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s, url := start(t, Options{Files: map[string]File{"media/clip.mp4": {Seed: 3, Size: int64(len(data)), Path: p}}})
	resp, body := get(t, url+"media/clip.mp4", map[string]string{"Range": "bytes=9990-"})
	if resp.StatusCode != http.StatusPartialContent || string(body) != string(data[9990:]) || resp.Header.Get("ETag") == "" {
		t.Fatalf("range: %s, %q, ETag %q", resp.Status, body, resp.Header.Get("ETag"))
	}
	if _, body := get(t, url+"media/clip.mp4", nil); string(body) != string(data) {
		t.Fatalf("whole file: %d bytes, want %d", len(body), len(data))
	}
	if err := s.Replace("media/clip.mp4"); err == nil {
		t.Fatal("Replace of a file from disk succeeded")
	}
}
