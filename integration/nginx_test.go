package integration

import (
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/playhead/playhead/internal/nginxtest"
	"github.com/playhead/playhead/internal/pattern"
)

// nginxTree is written to disk and served by nginx: names that need escaping, one longer
// than the 50 characters nginx's HTML index shows before cutting it short, an empty
// file and nested directories.
var nginxTree = map[string]int64{
	"a.bin":            3<<20 + 17,
	"b b.bin":          1 << 20,
	"ünï.mkv":          512<<10 + 3,
	"empty":            0,
	"sub/c.bin":        2 << 20,
	"sub/deeper/d.bin": 100 << 10,
	"a-very-long-file-name-that-nginx-cuts-short-in-its-html-index.bin": 300 << 10,
}

// startNginx serves files (path → size, pattern bytes seeded by seedOf) with nginx and
// returns the base URLs of its HTML and JSON indexes. nginx is stopped when the test
// ends. Without nginx the test is skipped, unless PLAYHEAD_REQUIRE_NGINX=1.
func startNginx(t *testing.T, files map[string]int64) (htmlURL, jsonURL string) {
	t.Helper()
	www := t.TempDir()
	for p, size := range files {
		writePatternFile(t, filepath.Join(www, filepath.FromSlash(p)), seedOf(p), size)
	}
	return serveNginx(t, www)
}

// startNginxWWW is startNginx that also returns the directory nginx serves, for tests
// that change files at the origin.
func startNginxWWW(t *testing.T, files map[string]int64) (www, htmlURL, jsonURL string) {
	t.Helper()
	www = t.TempDir()
	for p, size := range files {
		writePatternFile(t, filepath.Join(www, filepath.FromSlash(p)), seedOf(p), size)
	}
	htmlURL, jsonURL = serveNginx(t, www)
	return www, htmlURL, jsonURL
}

// serveNginx serves the directory www with nginx (internal/nginxtest) and returns the
// base URLs of its HTML and JSON indexes. nginx is stopped when the test ends.
func serveNginx(t *testing.T, www string) (htmlURL, jsonURL string) {
	t.Helper()
	s := nginxtest.Start(t, www)
	return s.HTMLURL, s.JSONURL
}

// writePatternFile writes size pattern bytes for seed to p, making its directory.
func writePatternFile(t *testing.T, p string, seed uint64, size int64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, &pattern.Reader{Seed: seed, Size: size}); err != nil {
		t.Fatal(err)
	}
}

// indexType returns the media type of the directory index at url.
func indexType(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt
}

// nginx as the origin, with both index styles: the listing shows every file with its
// exact size and every byte reads back right.
func TestNginxOrigin(t *testing.T) {
	htmlURL, jsonURL := startNginx(t, nginxTree)
	for _, c := range []struct{ name, url, mediaType string }{
		{"html", htmlURL, "text/html"},
		{"json", jsonURL, "application/json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := indexType(t, c.url); got != c.mediaType {
				t.Fatalf("nginx index at %s is %q, want %q: the config does not test this style", c.url, got, c.mediaType)
			}
			m := mountHTTP(t, c.url, testOptions(t))
			for _, dir := range []string{"", "sub", "sub/deeper"} {
				got, want := listing(t, m.Path(dir)), wantListing(nginxTree, dir)
				if !slices.Equal(got, want) {
					t.Errorf("listing of %q:\n got %q\nwant %q", dir, got, want)
				}
			}
			for p, size := range nginxTree {
				verifyWhole(t, m.Path(p), seedOf(p), size)
			}
			const p = "sub/c.bin"
			if err := randomReads(m.Path(p), seedOf(p), nginxTree[p], 2, 40, 300<<10); err != nil {
				t.Error(err)
			}
		})
	}
}
