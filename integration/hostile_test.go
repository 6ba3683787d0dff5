package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/playhead/playhead/internal/pattern"
)

// hostileOrigin serves hand-written directory listings and, for any other path, a
// pattern file whose seed and size come from its name, so any entry a listing offers
// can be read and checked.
type hostileOrigin struct {
	listings map[string]listingBody // by URL path, ending in "/"
}

type listingBody struct {
	contentType string
	body        []byte
}

const hostileFileSize = 300<<10 + 7

func (h *hostileOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if l, ok := h.listings[r.URL.Path]; ok {
		w.Header().Set("Content-Type", l.contentType)
		w.Write(l.body)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/") {
		if _, ok := h.listings[r.URL.Path]; !ok {
			http.NotFound(w, r)
			return
		}
	}
	if _, ok := h.listings[r.URL.Path+"/"]; ok {
		http.Redirect(w, r, r.URL.Path+"/", http.StatusMovedPermanently)
		return
	}
	name := path.Base(r.URL.Path)
	http.ServeContent(w, r, name, time.Time{}, &patternFile{seed: seedOf(name), size: hostileFileSize})
}

// patternFile is an io.ReadSeeker over a pattern file, for http.ServeContent.
type patternFile struct {
	seed      uint64
	size, pos int64
}

func (p *patternFile) Read(b []byte) (int, error) {
	r := pattern.Reader{Seed: p.seed, Size: p.size}
	n, err := r.ReadAt(b, p.pos)
	p.pos += int64(n)
	return n, err
}

func (p *patternFile) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case 1:
		off += p.pos
	case 2:
		off += p.size
	}
	p.pos = off
	return off, nil
}

func startHostileOrigin(t *testing.T, h *hostileOrigin) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// htmlListing is an nginx-style HTML index of the given hrefs, each shown with a date
// and the exact size of the origin's files.
func htmlListing(hrefs []string) listingBody {
	var b bytes.Buffer
	b.WriteString("<html><head><title>Index</title></head><body><h1>Index</h1><hr><pre><a href=\"../\">../</a>\n")
	for _, h := range hrefs {
		size := fmt.Sprint(hostileFileSize)
		if strings.HasSuffix(h, "/") {
			size = "-"
		}
		fmt.Fprintf(&b, "<a href=\"%s\">%s</a>     01-Jan-2024 10:00    %s\n", h, h, size)
	}
	b.WriteString("</pre><hr></body></html>\n")
	return listingBody{"text/html", b.Bytes()}
}

// jsonListing is an nginx autoindex_format json listing of names (files unless they
// end in "/"), each with the origin's file size.
func jsonListing(names []string) listingBody {
	var b bytes.Buffer
	b.WriteString("[\n")
	for i, n := range names {
		if i > 0 {
			b.WriteString(",\n")
		}
		if d, ok := strings.CutSuffix(n, "/"); ok {
			fmt.Fprintf(&b, `{ "name":%s, "type":"directory", "mtime":"Mon, 01 Jan 2024 10:00:00 GMT" }`, jsonString(d))
		} else {
			fmt.Fprintf(&b, `{ "name":%s, "type":"file", "mtime":"Mon, 01 Jan 2024 10:00:00 GMT", "size":%d }`, jsonString(n), hostileFileSize)
		}
	}
	b.WriteString("\n]\n")
	return listingBody{"application/json", b.Bytes()}
}

// jsonString quotes s as JSON does, except that bytes which are not UTF-8 are written
// raw, as nginx writes a file name it read from disk.
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteByte(s[i])
			i++
			continue
		}
		q, _ := json.Marshal(string(r))
		b.Write(q[1 : len(q)-1])
		i += size
	}
	b.WriteByte('"')
	return b.String()
}

// badName reports why a name must never appear in a directory read through the mount.
func badName(n string) string {
	switch {
	case n == "" || n == "." || n == "..":
		return "empty, . or .."
	case strings.ContainsAny(n, "/\x00"):
		return "contains / or NUL"
	case strings.ContainsFunc(n, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "contains a control character"
	}
	return ""
}

// Listings written by a hostile or broken server: names with "/", "..", ".", control
// characters, NUL, links out of the directory or to other hosts, duplicates, and a
// listing of 100,000 entries. The mount must show only names that are safe path
// elements, each once, read each of them right, and stay up.
func TestHostileListings(t *testing.T) {
	long300, long1100 := strings.Repeat("L", 300)+".bin", strings.Repeat("X", 1100)+".bin"
	hostileHrefs := []string{
		"ok.bin", "dup.bin", "dup.bin", "./dup.bin", "sp%20ace.bin", "%C3%BCn%C3%AF.bin",
		"a%2Fb.bin", "..", "../", "../escape.bin", "%2E%2E", "%2e%2e/", ".", "./",
		"ctl%01x.bin", "nl%0Ax.bin", "cr%0Dx.bin", "tab%09x.bin", "del%7Fx.bin", "nul%00x.bin",
		"/abs.bin", "//other.example/x.bin", "http://other.example/x.bin", "javascript:alert(1)",
		"sub/", "sub/deep.bin", "?C=N;O=D", "#top", "q.bin?x=1",
		// Longer than ext4's NAME_MAX (255), which FUSE allows (up to 1024 bytes).
		long300,
		// Longer than FUSE's old limit (1024): older kernels refuse it, newer ones take
		// it; either way it must not take the rest of the listing down with it.
		long1100,
	}
	htmlWant := []string{long300, "dup.bin", "ok.bin", "sp ace.bin", "sub/", "ünï.bin"}
	jsonNames := []string{
		"ok.bin", "dup.bin", "dup.bin", "a/b.bin", "..", ".", "", "ctl\x01x.bin", "nl\nx.bin",
		"nul\x00x.bin", "del\x7fx.bin", "sub/", "../escape.bin", "sp ace.bin", "ünï.bin",
		"bad\xffutf8.bin",
	}
	// Go's JSON decoder turns the invalid byte into U+FFFD.
	jsonWant := []string{"bad\ufffdutf8.bin", "dup.bin", "ok.bin", "sp ace.bin", "sub/", "ünï.bin"}
	hugeCount := 100_000
	if long() {
		hugeCount = 300_000
	}
	huge := make([]string, hugeCount)
	for i := range huge {
		huge[i] = fmt.Sprintf("file-%07d.bin", i)
	}
	h := &hostileOrigin{listings: map[string]listingBody{
		"/html/":     htmlListing(hostileHrefs),
		"/html/sub/": htmlListing([]string{"deep.bin"}),
		"/json/":     jsonListing(jsonNames),
		"/json/sub/": jsonListing([]string{"deep.bin"}),
		"/huge/":     jsonListing(huge),
	}}
	base := startHostileOrigin(t, h)

	var shown, dropped int
	for _, c := range []struct {
		name string
		want []string
		sent int
	}{{"html", htmlWant, len(hostileHrefs)}, {"json", jsonWant, len(jsonNames)}} {
		t.Run(c.name, func(t *testing.T) {
			m := mountHTTP(t, base+"/"+c.name+"/", testOptions(t))
			des, err := os.ReadDir(m.Dir)
			if err != nil {
				t.Fatalf("readdir: %v", err)
			}
			var got []string
			for _, de := range des {
				n := de.Name()
				if why := badName(n); why != "" {
					t.Errorf("listing shows %q: %s", n, why)
				}
				if de.IsDir() {
					n += "/"
				}
				got = append(got, n)
			}
			if i := slices.Index(got, long1100); i >= 0 {
				verifyWhole(t, m.Path(long1100), seedOf(long1100), hostileFileSize)
				got = slices.Delete(got, i, i+1)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("listing:\n got %q\nwant %q", got, c.want)
			}
			for _, n := range c.want {
				if strings.HasSuffix(n, "/") {
					verifyWhole(t, m.Path(n+"deep.bin"), seedOf("deep.bin"), hostileFileSize)
					continue
				}
				verifyWhole(t, m.Path(n), seedOf(n), hostileFileSize)
			}
			// Names the listing dropped do not exist, and asking for them is harmless.
			for _, n := range []string{"..x", "a\\b.bin", "ctl\x01x.bin"} {
				if _, err := os.Stat(m.Path(n)); err == nil {
					t.Errorf("stat %q succeeded", n)
				}
			}
			shown += len(got)
			dropped += c.sent - len(got)
		})
	}

	t.Run("huge", func(t *testing.T) {
		m := mountHTTP(t, base+"/huge/", testOptions(t))
		start := time.Now()
		names, err := readDirNames(m.Dir)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("readdir of %d entries: %v", hugeCount, err)
		}
		// The listing is cached now: a second readdir costs only FUSE (long version only:
		// under -race it takes seconds).
		var cached time.Duration
		if long() {
			start = time.Now()
			again, err := readDirNames(m.Dir)
			cached = time.Since(start)
			if err != nil || len(again) != len(names) {
				t.Errorf("second readdir: %d names, %v", len(again), err)
			}
		}
		if !slices.Equal(names, huge) {
			t.Errorf("listing of %d entries came back as %d names (first %q)", hugeCount, len(names), names[:min(3, len(names))])
		}
		n := huge[hugeCount/2]
		verifyWhole(t, m.Path(n), seedOf(n), hostileFileSize)
		figure(t, "JSON listing of %d entries (%.1f MiB) through the mount: first readdir %v, again (long version) %v, a file in it reads right",
			hugeCount, mib(int64(len(h.listings["/huge/"].body))), took.Round(time.Millisecond), cached.Round(time.Millisecond))
		if took > 30*time.Second {
			t.Errorf("readdir of %d entries took %v", hugeCount, took)
		}
	})
	figure(t, "%d hostile listing entries (HTML and JSON: /, .., ., control characters, NUL, invalid UTF-8, "+
		"links out of the directory or to other hosts, duplicates, a name over NAME_MAX): %d shown, all safe and "+
		"read right, %d dropped", len(hostileHrefs)+len(jsonNames), shown, dropped)
}

// readDirNames lists dir's names in readdir order, sorted.
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}
