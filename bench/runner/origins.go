package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/linkemu"
	"github.com/playhead/playhead/origin"
)

// originServer is the HTTP server behind the link, as the runner counts it: the
// built-in origin (*origin.Server) or nginx.
type originServer interface {
	// Stats are the counters since the last ResetStats: requests, response body bytes
	// and new connections.
	Stats() origin.Stats
	ResetStats()
	Close() error
}

var _ originServer = (*origin.Server)(nil)

// writeFiles writes the origin's generated files under dir (origin paths), byte for byte
// what the built-in origin serves, so nginx and the local-disk ceiling read the same
// (files with a Path are symbolic links to it).
func writeFiles(ctx context.Context, dir string, files map[string]origin.File) error {
	for p, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if f.Path != "" {
			// A file already on disk (real media) is linked, not copied: its bytes are
			// the same, and reading it is reading this disk.
			if err := os.Symlink(f.Path, dst); err != nil {
				return fmt.Errorf("link origin file %s: %w", dst, err)
			}
			continue
		}
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, &pattern.Reader{Seed: origin.Seed(f.Seed, 0), Size: f.Size})
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write origin file %s: %w", dst, err)
		}
	}
	return nil
}

// nginxConf is a single foreground nginx, with every path it writes under its prefix
// directory, serving the files with an HTML index (as an nginx file server is usually
// set up) and logging each request's connection and body bytes for the counters.
// keepalive_requests is raised so that no client's connection is closed by nginx in the
// middle of a trial (the default, 1000, would cost seek-heavy clients a new connection).
const nginxConf = `daemon off;
master_process off;
worker_processes 1;
error_log stderr warn;
pid %[1]s/nginx.pid;
events { worker_connections 1024; }
http {
	log_format bench '$connection $connection_requests $body_bytes_sent $status';
	access_log %[1]s/access.log bench;
	client_body_temp_path %[1]s/client_body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	default_type application/octet-stream;
	sendfile on;
	keepalive_requests 1000000;
	keepalive_timeout 300s;
	server {
		listen 127.0.0.1:%[3]d;
		root %[2]s;
		autoindex on;
		autoindex_exact_size on;
	}
}
`

// nginxOrigin is nginx serving the origin's files from disk. Its counters come from
// its access log (requests and body bytes, logged when each request ends) and from the
// link in front of it (new connections: nginx does not log accepts).
type nginxOrigin struct {
	url     string
	version string
	cmd     *exec.Cmd
	logPath string
	prefix  string
	out     *tailBuffer
	exited  chan struct{}

	link *linkemu.Link // set by Run once the link is up

	mu        sync.Mutex // guards the marks below
	logMark   int64      // access log size at the last reset
	connsMark int64      // the link's accepted connections at the last reset
}

// nginxStartTimeout bounds how long nginx may take to answer.
const nginxStartTimeout = 10 * time.Second

// Settling of nginx's access log: a request is logged just after its last byte is sent
// (the client may already have it), and one that ended when its client went away once
// nginx notices, a moment later. The counters wait for the log to be quiet before they
// are read (logQuiet) and before they are reset (resetQuiet, short: the mount has just
// answered, and its requests end with their responses).
const (
	logQuiet     = 300 * time.Millisecond
	resetQuiet   = 100 * time.Millisecond
	logSettleMax = 3 * time.Second
)

// startNginx starts nginx (bin, or "nginx" from PATH) serving root, with its prefix
// directory under tmp.
func startNginx(bin, root, tmp string) (*nginxOrigin, error) {
	if bin == "" {
		bin = "nginx"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("bench: --origin nginx: nginx not found (make bench-deps installs it): %w", err)
	}
	prefix, err := os.MkdirTemp(tmp, "playhead-bench-nginx-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, prefix, root, port), 0o644); err != nil {
		return nil, err
	}
	n := &nginxOrigin{
		url:     fmt.Sprintf("http://127.0.0.1:%d/", port),
		version: nginxVersion(path),
		logPath: filepath.Join(prefix, "access.log"),
		prefix:  prefix,
		out:     &tailBuffer{max: stderrTail},
		exited:  make(chan struct{}),
	}
	n.cmd = exec.Command(path, "-e", "stderr", "-p", prefix, "-c", conf)
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		os.RemoveAll(prefix)
		return nil, fmt.Errorf("bench: start nginx: %w", err)
	}
	go func() { n.cmd.Wait(); close(n.exited) }()
	if err := n.waitReady(); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *nginxOrigin) waitReady() error {
	client := &http.Client{Timeout: time.Second}
	for start := time.Now(); time.Since(start) < nginxStartTimeout; time.Sleep(readyPoll) {
		select {
		case <-n.exited:
			return fmt.Errorf("bench: nginx exited at start%s", n.out.quote())
		default:
		}
		resp, err := client.Get(n.url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("bench: nginx did not answer %s within %v%s", n.url, nginxStartTimeout, n.out.quote())
}

func (n *nginxOrigin) describe() string {
	return n.version + " (serving the files from disk, autoindex on)"
}

// Stats implements originServer.
func (n *nginxOrigin) Stats() origin.Stats {
	n.mu.Lock()
	mark, connsMark := n.logMark, n.connsMark
	n.mu.Unlock()
	n.settleLog(logQuiet)
	var st origin.Stats
	f, err := os.Open(n.logPath)
	if err == nil {
		defer f.Close()
		if _, err := f.Seek(mark, io.SeekStart); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				// $connection $connection_requests $body_bytes_sent $status
				fields := strings.Fields(sc.Text())
				if len(fields) < 3 {
					continue
				}
				st.Requests++
				b, _ := strconv.ParseInt(fields[2], 10, 64)
				st.BytesWritten += b
			}
		}
	}
	if n.link != nil {
		st.NewConns = n.link.Stats().Accepted - connsMark
	}
	return st
}

// settleLog waits until the access log has not grown for quiet (logSettleMax at most).
func (n *nginxOrigin) settleLog(quiet time.Duration) {
	size := func() int64 {
		st, err := os.Stat(n.logPath)
		if err != nil {
			return -1
		}
		return st.Size()
	}
	last, since := size(), time.Now()
	for start := time.Now(); time.Since(start) < logSettleMax; time.Sleep(quiet / 6) {
		if s := size(); s != last {
			last, since = s, time.Now()
		} else if time.Since(since) >= quiet {
			return
		}
	}
}

// ResetStats implements originServer.
func (n *nginxOrigin) ResetStats() {
	n.settleLog(resetQuiet)
	var size int64
	if st, err := os.Stat(n.logPath); err == nil {
		size = st.Size()
	}
	var conns int64
	if n.link != nil {
		conns = n.link.Stats().Accepted
	}
	n.mu.Lock()
	n.logMark, n.connsMark = size, conns
	n.mu.Unlock()
}

// Close implements originServer: it stops nginx and removes its prefix directory.
func (n *nginxOrigin) Close() error {
	var err error
	select {
	case <-n.exited:
	default:
		n.cmd.Process.Signal(syscall.SIGQUIT) // graceful: finish requests, remove the pid file
		select {
		case <-n.exited:
		case <-time.After(killWait):
			n.cmd.Process.Kill()
			<-n.exited
			err = errors.New("bench: nginx did not stop on SIGQUIT; killed")
		}
	}
	os.RemoveAll(n.prefix)
	return err
}

// nginxVersion returns "nginx/1.22.1" from `nginx -v`, or "nginx (version unknown)".
func nginxVersion(path string) string {
	out, _ := exec.Command(path, "-v").CombinedOutput()
	if _, v, ok := strings.Cut(strings.TrimSpace(string(out)), "version: "); ok {
		return v
	}
	return "nginx (version unknown)"
}

// freePort finds a free loopback port for a server that must be told its port. Another
// process could take it before the server binds it; the range makes that unlikely.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
