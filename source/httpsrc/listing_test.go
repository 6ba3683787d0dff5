package httpsrc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/source"
)

// dirSize stands for a directory in the fixtures' name → size maps.
const dirSize = -2

func TestParseListingFixtures(t *testing.T) {
	const long = "this-is-a-very-long-file-name-that-nginx-truncates-in-the-text.mkv"
	exact := time.Date(2024, 3, 14, 9, 12, 31, 0, time.UTC)
	minute := time.Date(2024, 3, 14, 9, 12, 0, 0, time.UTC)
	cases := []struct {
		file, contentType string
		want              map[string]int64
		// validator is every file's Version.ModTime; shown is what Entry.Time gives
		// every entry, directories included.
		validator, shown time.Time
	}{
		{"nginx.html", "text/html", map[string]int64{
			"Season 1": dirSize, "a:b.mkv": 1234, "big movie.mkv": 7340032000, "r&b.mp3": 0, long: 999999}, time.Time{}, minute},
		{"nginx_inexact.html", "text/html; charset=utf-8", map[string]int64{
			"Season 1": dirSize, "a:b.mkv": 1234, "big movie.mkv": -1, "r&b.mp3": 0, long: -1}, time.Time{}, minute},
		{"nginx.json", "application/json", map[string]int64{
			"Season 1": dirSize, "a:b.mkv": 1234, "big movie.mkv": 7340032000, "r&b.mp3": 0, long: 999999}, exact, exact},
		{"apache.html", "text/html;charset=UTF-8", map[string]int64{
			"Season 1": dirSize, "a:b.mkv": -1, "big movie.mkv": -1, "r&b.mp3": 0, long: 512}, time.Time{}, minute},
		{"gofileserver.html", "text/html; charset=utf-8", map[string]int64{
			"Season 1": dirSize, "a:b.mkv": -1, "big movie.mkv": -1, "r&b.mp3": -1, long: -1}, time.Time{}, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "listing", c.file))
			if err != nil {
				t.Fatal(err)
			}
			base, _ := url.Parse("http://example.org/media/")
			entries, err := parseListing(base, c.contentType, body)
			if err != nil {
				t.Fatal(err)
			}
			got := make(map[string]int64)
			for _, e := range entries {
				if _, dup := got[e.Name]; dup {
					t.Errorf("duplicate %q", e.Name)
				}
				size := e.Version.Size
				if e.IsDir {
					size = dirSize
				} else if !e.Version.ModTime.Equal(c.validator) {
					t.Errorf("%q: Version.ModTime %v, want %v", e.Name, e.Version.ModTime, c.validator)
				}
				if !e.Time().Equal(c.shown) {
					t.Errorf("%q: shown time %v, want %v", e.Name, e.Time(), c.shown)
				}
				got[e.Name] = size
			}
			if len(got) != len(c.want) {
				t.Errorf("got %d entries %v, want %v", len(got), got, c.want)
			}
			for name, size := range c.want {
				if g, ok := got[name]; !ok || g != size {
					t.Errorf("%q: size %d (present %v), want %d", name, g, ok, size)
				}
			}
		})
	}
}

// Each listing's date and time columns, and text that only looks like them.
func TestTimeFromColumns(t *testing.T) {
	cases := []struct {
		text string
		want time.Time
	}{
		{"   24-Nov-2026 11:54     1234", time.Date(2026, 11, 24, 11, 54, 0, 0, time.UTC)},
		{"\u00a02026-11-24 11:54  \u00a0 1.2K", time.Date(2026, 11, 24, 11, 54, 0, 0, time.UTC)},
		{" 2026-Nov-24 11:54:14  1.2K  application/octet-stream", time.Date(2026, 11, 24, 11, 54, 14, 0, time.UTC)},
		{" 24-Nov-2026 11:54:14  -", time.Date(2026, 11, 24, 11, 54, 14, 0, time.UTC)},
		{"  -  ", time.Time{}},
		{" 11:54 1234", time.Time{}},             // no date
		{" 31-Feb-2026 11:54 1234", time.Time{}}, // no such day
		{" 24-Nov-2026 25:61 1234", time.Time{}}, // no such time
		{" A film, 2 hours 10:00", time.Time{}},  // a description, not a date
		{" 24/11/2026 11:54 1234", time.Time{}},  // a format no listing uses
	}
	for _, c := range cases {
		if got := timeFromColumns(c.text); !got.Equal(c.want) {
			t.Errorf("timeFromColumns(%q) = %v, want %v", c.text, got, c.want)
		}
	}
}

func TestParseListingLinkRules(t *testing.T) {
	page := `<html><body><pre>
<a href="../">../</a>
<a href="?C=N;O=D">Name</a>
<a href="#top">top</a>
<a href="mailto:admin@example.org">mail</a>
<a href="http://other.example/media/x.mkv">other host</a>
<a href="//other.example/media/y.mkv">other host, no scheme</a>
<a href="https://example.org/media/z.mkv">other scheme</a>
<a href="http://example.org/media/abs.mkv">absolute URL, same host</a>
<a href="/media/rooted.mkv">absolute path under the dir</a>
<a href="/elsewhere/no.mkv">absolute path elsewhere</a>
<a href="sub/deeper.mkv">grandchild</a>
<a href="%2e%2e/">escaped parent</a>
<a href="./">self</a>
<a href="a%2Fb.mkv">escaped slash</a>
<a href="ctl%01.mkv">control char</a>
<a href="nul%00.mkv">nul</a>
<a href="tab%09.mkv">tab</a>
<a href="dup.mkv">dup</a>
<a href="dup.mkv">dup again</a>
<a href="dir/">dir</a>
<a>no href</a>
<a href="%zz">bad escape</a>
<a href="caf%C3%A9.mkv">unicode</a>
</pre></body></html>`
	base, _ := url.Parse("http://example.org/media/")
	entries, err := parseListing(base, "text/html", []byte(page))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		n := e.Name
		if e.IsDir {
			n += "/"
		}
		got = append(got, n)
	}
	slices.Sort(got)
	want := []string{"abs.mkv", "café.mkv", "dir/", "dup.mkv", "rooted.mkv"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestParseListingNotAListing(t *testing.T) {
	base, _ := url.Parse("http://example.org/media/")
	if _, err := parseListing(base, "video/x-matroska", []byte("\x1aE\xdf\xa3")); err == nil || !strings.Contains(err.Error(), "not a listing") {
		t.Fatalf("err = %v", err)
	}
	if _, err := parseListing(base, "application/json", []byte("{not json")); err == nil {
		t.Fatal("bad JSON accepted")
	}
}

// TestListOverHTTP serves each fixture from a directory URL and lists it through the
// Source, redirects and content negotiation included.
func TestListOverHTTP(t *testing.T) {
	var gotAccept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/media":
			http.Redirect(w, r, "/media/", http.StatusMovedPermanently)
		case "/media/":
			gotAccept = r.Header.Get("Accept")
			w.Header().Set("Content-Type", "application/json")
			http.ServeFile(w, r, filepath.Join("testdata", "listing", "nginx.json"))
		case "/media/Season 1":
			http.Redirect(w, r, "/media/Season%201/", http.StatusMovedPermanently)
		case "/media/Season 1/":
			w.Header().Set("Content-Type", "text/html")
			http.ServeFile(w, r, filepath.Join("testdata", "listing", "apache.html"))
		case "/secret/":
			http.Error(w, "no", http.StatusForbidden)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	s, err := New(srv.URL+"/media", Options{})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 5 || !strings.Contains(gotAccept, "application/json") {
		t.Fatalf("%d entries, Accept %q", len(entries), gotAccept)
	}
	st, err := s.Stat(ctx, "Season 1")
	if err != nil || !st.IsDir || st.Name != "Season 1" {
		t.Fatalf("Stat dir = %+v, %v", st, err)
	}
	entries, err = s.List(ctx, "Season 1")
	if err != nil || len(entries) != 5 {
		t.Fatalf("List subdir: %d entries, %v", len(entries), err)
	}
	if _, err := s.List(ctx, "nope"); !errorsIs(err, source.ErrNotFound) {
		t.Fatalf("List missing: %v", err)
	}
	s2, _ := New(srv.URL+"/secret/", Options{})
	if _, err := s2.List(ctx, ""); !errorsIs(err, source.ErrPermission) {
		t.Fatalf("List forbidden: %v", err)
	}
}
