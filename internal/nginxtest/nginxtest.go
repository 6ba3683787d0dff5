// Package nginxtest runs a real nginx for tests, serving a directory the test writes,
// the way users run nginx in front of their files. The integration tests and the source
// conformance suite's HTTP fixture both start it through here.
//
// Design notes and traps:
//   - One nginx in the foreground, without a master process, with every path it writes
//     inside a test temp directory; it is killed when the test ends, and also if the test
//     binary dies first (Pdeathsig), so no nginx outlives its test.
//   - It serves the same root four ways (see Server): an HTML index, a JSON index, one
//     that refuses everyone (403) and one that is always overloaded (503). Several
//     listeners of one nginx are the same origin as far as the files go.
//   - Ports are found free and then handed to nginx: another process could take one in
//     between; the range makes that unlikely enough for a test.
//   - Without nginx on PATH the test is skipped, unless PLAYHEAD_REQUIRE_NGINX=1 (CI),
//     where it fails.
package nginxtest

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireEnv is the variable that turns a missing nginx into a failure instead of a skip.
const RequireEnv = "PLAYHEAD_REQUIRE_NGINX"

// conf runs one nginx serving root four times (see Server). Arguments: 1 prefix
// directory, 2 root, 3-6 the ports of the HTML, JSON, denied and busy servers.
const conf = `daemon off;
master_process off;
worker_processes 1;
error_log stderr warn;
pid %[1]s/nginx.pid;
events { worker_connections 128; }
http {
	access_log off;
	log_not_found off;
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
	server {
		listen 127.0.0.1:%[5]d;
		root %[2]s;
		autoindex on;
		deny all;
	}
	server {
		listen 127.0.0.1:%[6]d;
		root %[2]s;
		location / {
			add_header Retry-After 1 always;
			return 503;
		}
	}
}
`

// Server is one running nginx. Each URL is a directory URL (trailing slash) of the same
// root.
type Server struct {
	Root string // the directory served
	// HTMLURL serves an HTML autoindex with exact sizes; under /chunked/ every answer is
	// chunked, without Content-Length or Range support.
	HTMLURL string
	// JSONURL serves nginx's JSON autoindex (exact sizes and times).
	JSONURL string
	// DeniedURL answers every request 403 Forbidden (deny all), as an origin refusing
	// this client.
	DeniedURL string
	// BusyURL answers every request 503 Service Unavailable with Retry-After, as an
	// overloaded origin.
	BusyURL string
}

// Available reports whether nginx can be started, and why not.
func Available() (bin string, err error) {
	return exec.LookPath("nginx")
}

// Require skips t (or fails it when PLAYHEAD_REQUIRE_NGINX=1) if nginx is not
// installed, and returns its path.
func Require(t testing.TB) string {
	t.Helper()
	bin, err := Available()
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("nginx required (%s=1) but not found: %v", RequireEnv, err)
		}
		t.Skipf("nginx not installed (set %s=1 to fail instead): %v", RequireEnv, err)
	}
	return bin
}

// startTimeout bounds how long nginx may take to answer.
const startTimeout = 10 * time.Second

// Start serves the directory root with nginx until the test ends.
func Start(t testing.TB, root string) *Server {
	t.Helper()
	bin := Require(t)
	tmp := t.TempDir()
	ports := FreePorts(t, 4)
	confPath := filepath.Join(tmp, "nginx.conf")
	text := fmt.Appendf(nil, conf, tmp, root, ports[0], ports[1], ports[2], ports[3])
	if err := os.WriteFile(confPath, text, 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cmd := exec.Command(bin, "-e", "stderr", "-p", tmp, "-c", confPath)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
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
	url := func(port int) string { return fmt.Sprintf("http://127.0.0.1:%d/", port) }
	s := &Server{Root: root, HTMLURL: url(ports[0]), JSONURL: url(ports[1]),
		DeniedURL: url(ports[2]), BusyURL: url(ports[3])}
	for u, status := range map[string]int{s.HTMLURL: 200, s.JSONURL: 200, s.DeniedURL: 403, s.BusyURL: 503} {
		waitHTTP(t, u, status, exited)
	}
	return s
}

// FreePorts finds n free loopback ports.
func FreePorts(t testing.TB, n int) []int {
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

// waitHTTP waits until url answers status, failing if nginx exits or takes too long.
func waitHTTP(t testing.TB, url string, status int, exited <-chan struct{}) {
	t.Helper()
	const poll = 20 * time.Millisecond
	client := &http.Client{Timeout: time.Second}
	for start := time.Now(); time.Since(start) < startTimeout; time.Sleep(poll) {
		select {
		case <-exited:
			t.Fatalf("nginx exited before serving %s", url)
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == status {
				return
			}
		}
	}
	t.Fatalf("nginx did not answer %s with %d within %v", url, status, startTimeout)
}

// syncBuffer is a bytes.Buffer that nginx's output and the cleanup may use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
