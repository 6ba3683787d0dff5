package integration

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

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

// nginxConf runs one nginx in the foreground, without a master process, with every path
// it writes inside the test's directory. It serves the same root twice: an HTML index
// with exact sizes (and chunked answers without size under /chunked/), and nginx's JSON
// index.
const nginxConf = `daemon off;
master_process off;
worker_processes 1;
error_log stderr warn;
pid %[1]s/nginx.pid;
events { worker_connections 128; }
http {
	access_log off;
	client_body_temp_path %[1]s/client_body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	default_type application/octet-stream;
	server {
		listen 127.0.0.1:%[3]d;
		root %[2]s;
		autoindex on;
		autoindex_exact_size on;
		# Under /chunked/ every answer is chunked: sub_filter drops Content-Length (HEAD
		# included) and Range support, as some CDNs and object gateways do.
		location /chunked/ {
			sub_filter_types *;
			sub_filter playhead-never-matches "";
		}
	}
	server {
		listen 127.0.0.1:%[4]d;
		root %[2]s;
		autoindex on;
		autoindex_format json;
	}
}
`

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

// serveNginx serves the directory www with nginx as startNginx does, and returns the base
// URLs of its HTML and JSON indexes.
func serveNginx(t *testing.T, www string) (htmlURL, jsonURL string) {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if os.Getenv("PLAYHEAD_REQUIRE_NGINX") == "1" {
			t.Fatalf("nginx required but not found: %v", err)
		}
		t.Skipf("nginx not installed: %v", err)
	}
	tmp := t.TempDir()
	ports := freePorts(t, 2)
	conf := filepath.Join(tmp, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, tmp, www, ports[0], ports[1]), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, "-e", "stderr", "-p", tmp, "-c", conf)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("nginx output:\n%s", logs.String())
		}
	})
	htmlURL = fmt.Sprintf("http://127.0.0.1:%d/", ports[0])
	jsonURL = fmt.Sprintf("http://127.0.0.1:%d/", ports[1])
	for _, u := range []string{htmlURL, jsonURL} {
		waitHTTP(t, u, exited)
	}
	return htmlURL, jsonURL
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

// freePorts finds n free loopback ports. Another process could take one before nginx
// binds it; the port range makes that unlikely enough for a test.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// waitHTTP waits until url answers 200, failing if the server exits or takes too long.
func waitHTTP(t *testing.T, url string, exited <-chan struct{}) {
	t.Helper()
	const limit, poll = 10 * time.Second, 20 * time.Millisecond
	for start := time.Now(); time.Since(start) < limit; time.Sleep(poll) {
		select {
		case <-exited:
			t.Fatalf("nginx exited before serving %s", url)
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	t.Fatalf("nginx did not serve %s within %v", url, limit)
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
