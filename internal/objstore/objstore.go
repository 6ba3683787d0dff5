package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/testlog"
)

// Kind names an object store; its value is the URL scheme of the playhead source.
type Kind string

const (
	S3    Kind = "s3"
	Azure Kind = "azblob"
	GCS   Kind = "gs"
)

// Kinds lists every kind, for tests that run against each.
var Kinds = []Kind{S3, Azure, GCS}

// Azurite's well-known development account (the same in every Azurite; not a secret).
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// RequireEnv, set to 1, turns a missing or silent emulator from a skip into a failure
// (CI sets it: .ci/run).
const RequireEnv = "PLAYHEAD_REQUIRE_OBJSTORE"

// InstallHint is what to run to install the emulators.
const InstallHint = "make deps (or scripts/objstore-servers.sh)"

const (
	// startTimeout bounds the wait for a fresh server to answer. MinIO answers in about
	// 1 s, Azurite (node) and fake-gcs-server in well under that; the margin is for a
	// loaded 2-core machine running -race tests beside it.
	startTimeout = 60 * time.Second
	// stopTimeout bounds the wait for a killed server to be reaped.
	stopTimeout = 10 * time.Second
	// opTimeout bounds each harness operation (create bucket, put, delete, metrics).
	opTimeout = 30 * time.Second
	// logTail is how much of a server's own log goes into a failure message.
	logTail = 4096
)

// Server is one running emulator, stopped when the test that started it ends.
type Server struct {
	kind     Kind
	addr     string // 127.0.0.1:PORT
	endpoint string
	user     string // S3 access key id / Azure account
	secret   string
	log      *testlog.Buffer

	clientOnce sync.Once
	client     client // the SDK client behind Put, Delete, NewBucket
	clientErr  error
}

// TestBin is the directory the emulators are installed in: $PLAYHEAD_TESTBIN, else
// ~/.cache/playhead (scripts/objstore-servers.sh installs there).
func TestBin() string {
	if d := os.Getenv("PLAYHEAD_TESTBIN"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "playhead-testbin")
	}
	return filepath.Join(home, ".cache", "playhead")
}

// binary returns the path of kind's server program: the one installed in TestBin, else
// one on PATH.
func binary(kind Kind) (string, error) {
	var rel, name string
	switch kind {
	case S3:
		rel, name = "bin/minio", "minio"
	case Azure:
		rel, name = "azurite/node_modules/.bin/azurite-blob", "azurite-blob"
	case GCS:
		rel, name = "bin/fake-gcs-server", "fake-gcs-server"
	default:
		return "", fmt.Errorf("unknown kind %q", kind)
	}
	p := filepath.Join(TestBin(), filepath.FromSlash(rel))
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		if kind == Azure {
			if _, err := exec.LookPath("node"); err != nil {
				return "", fmt.Errorf("%s is installed but node is not on PATH: %v", p, err)
			}
		}
		return p, nil
	}
	if lp, err := exec.LookPath(name); err == nil {
		return lp, nil
	}
	return "", fmt.Errorf("%s not installed: no %s and no %s on PATH", name, p, name)
}

// unavailable fails the test when PLAYHEAD_REQUIRE_OBJSTORE=1, else skips it.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) + "\ninstall the emulators with: " + InstallHint
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s (%s=1)", msg, RequireEnv)
	}
	t.Skipf("%s (set %s=1 to fail instead)", msg, RequireEnv)
}

// Start starts a fresh emulator of kind on a free loopback port, with its data in a
// t.TempDir(), and kills it when the test ends (waiting at most 10 s). A missing
// binary, or a server that does not answer within 60 s, skips the test, or fails it
// with PLAYHEAD_REQUIRE_OBJSTORE=1; the message has the reason, the server's own log
// tail and the install command.
func Start(t testing.TB, kind Kind) *Server {
	t.Helper()
	bin, err := binary(kind)
	if err != nil {
		unavailable(t, "objstore: %s emulator: %v", kind, err)
	}
	// A free port can be taken by someone else between our probe and the server's
	// bind: a server that exits at once is started again on another port.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := start(t, kind, bin)
		if err == nil {
			return s
		}
		lastErr = err
		if !errors.Is(err, errExited) {
			break
		}
	}
	unavailable(t, "objstore: %s emulator did not start: %v", kind, lastErr)
	return nil
}

var errExited = errors.New("server exited")

// start starts one server of kind on a port free when probed, and returns it once it
// answers; it is killed when the test ends. An error wrapping errExited means the
// server exited before answering (the port may have been taken), so Start tries again.
func start(t testing.TB, kind Kind, bin string) (*Server, error) {
	t.Helper()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	s := &Server{kind: kind, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), log: new(testlog.Buffer)}
	s.endpoint = "http://" + s.addr
	args, env, ready := s.serverArgs(port, dir)
	began := time.Now()
	p, err := launch(t, kind, bin, dir, args, env, s.log)
	if err != nil {
		return nil, err
	}
	if err := s.awaitReady(ready, p); err != nil {
		return nil, err
	}
	t.Logf("objstore: %s server on %s, ready in %v", kind, s.endpoint, time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("objstore: %s server log tail:\n%s", kind, tail(s.log.String()))
		}
		p.stop()
	})
	return s, nil
}

// serverArgs sets s's credentials (and Azure's endpoint) for its kind and returns the
// arguments and environment that start that kind's server on port with its data in
// dir, and ready, the path that answers 200 once the server serves ("": any answer).
func (s *Server) serverArgs(port int, dir string) (args, env []string, ready string) {
	switch s.kind {
	case S3:
		s.user, s.secret = "ph"+randHex(6), randHex(20)
		// MINIO_BROWSER=off: no console listener; MINIO_UPDATE=off: no update check
		// over the network; MINIO_CI_CD: no checks meant for production drives.
		env = []string{"MINIO_ROOT_USER=" + s.user, "MINIO_ROOT_PASSWORD=" + s.secret,
			"MINIO_PROMETHEUS_AUTH_TYPE=public", "MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=on"}
		args = []string{"server", filepath.Join(dir, "data"), "--address", s.addr,
			"--certs-dir", filepath.Join(dir, "certs"), "--quiet"}
		ready = "/minio/health/ready"
	case Azure:
		s.user, s.secret = AzuriteAccount, AzuriteKey
		s.endpoint += "/" + AzuriteAccount
		args = []string{"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port),
			"--location", dir, "--skipApiVersionCheck", "--loose", "--silent", "--disableTelemetry"}
		ready = "" // any HTTP answer
	case GCS:
		args = []string{"-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(port),
			"-backend", "memory", "-public-host", s.addr, "-external-url", s.endpoint, "-log-level", "warn"}
		ready = "/_internal/healthcheck"
	}
	return args, env, ready
}

// process is a started server program. exited is closed once it has been reaped, and
// waitErr is set before that, so it may be read once exited is closed.
type process struct {
	t       testing.TB
	kind    Kind
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// launch starts bin with args and env in dir, its output going to log.
func launch(t testing.TB, kind Kind, bin, dir string, args, env []string, log *testlog.Buffer) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so the kill reaches anything it started; and killed with
	// the test binary if that dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = stopTimeout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %v", bin, err)
	}
	p := &process{t: t, kind: kind, cmd: cmd, exited: make(chan struct{})}
	go func() { p.waitErr = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// stop kills p's process group and waits at most stopTimeout for p to be reaped.
func (p *process) stop() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		p.t.Errorf("objstore: %s server (pid %d) not reaped %v after SIGKILL", p.kind, p.cmd.Process.Pid, stopTimeout)
	}
}

// awaitReady polls s's ready path until it answers (200, or anything when ready is
// ""). A server that exits first is an error wrapping errExited; one that has not
// answered within startTimeout is stopped, and an error.
func (s *Server) awaitReady(ready string, p *process) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr+ready, nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if ready == "" || resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%w (%v) before answering on %s; its log:\n%s", errExited, p.waitErr, s.addr, tail(s.log.String()))
		case <-ctx.Done():
			p.stop()
			return fmt.Errorf("no answer on %s within %v (last: %v); its log:\n%s", s.addr, startTimeout, err, tail(s.log.String()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freePort returns a loopback TCP port nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func tail(s string) string {
	if len(s) > logTail {
		s = "…" + s[len(s)-logTail:]
	}
	if strings.TrimSpace(s) == "" {
		return "(empty)"
	}
	return s
}

// Kind returns the server's kind.
func (s *Server) Kind() Kind { return s.kind }

// Endpoint returns the URL the cloud's SDK is pointed at: http://127.0.0.1:PORT for
// MinIO and fake-gcs-server, and for Azurite the blob service URL with the account as
// its first path segment, http://127.0.0.1:PORT/devstoreaccount1 (what
// azblob.NewClientWithSharedKeyCredential takes as serviceURL).
func (s *Server) Endpoint() string { return s.endpoint }

// Log returns what the server has written so far (Azurite runs with --silent: no
// access log).
func (s *Server) Log() string { return s.log.String() }

// Params returns the playhead source settings (flag names without "--") that reach
// this server.
func (s *Server) Params() map[string]string { return s.paramsFor(s.endpoint) }

func (s *Server) paramsFor(endpoint string) map[string]string {
	switch s.kind {
	case S3:
		return map[string]string{"s3-endpoint": endpoint, "s3-region": "us-east-1", "s3-path-style": "true"}
	case Azure:
		return map[string]string{"azure-account": AzuriteAccount, "azure-endpoint": endpoint}
	default:
		return map[string]string{"gcs-endpoint": endpoint}
	}
}

// Env returns the credentials in the cloud's standard environment variables:
//   - S3: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (MinIO's root user, random per
//     server), and AWS_EC2_METADATA_DISABLED=true so that no AWS SDK code path looks
//     for credentials or a region at the EC2 metadata address.
//   - Azure: AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY (Azurite's development account).
//   - GCS: STORAGE_EMULATOR_HOST=127.0.0.1:PORT (host and port, no scheme: gocloud's
//     gcsblob prepends http://). fake-gcs-server checks no credentials; the variable is
//     what makes gocloud's gs:// URL opener skip Google's default credentials (and their
//     metadata-server probe) and use this server.
func (s *Server) Env() map[string]string { return s.envWith(s.secret) }

func (s *Server) envWith(secret string) map[string]string {
	switch s.kind {
	case S3:
		return map[string]string{"AWS_ACCESS_KEY_ID": s.user, "AWS_SECRET_ACCESS_KEY": secret, "AWS_EC2_METADATA_DISABLED": "true"}
	case Azure:
		return map[string]string{"AZURE_STORAGE_ACCOUNT": s.user, "AZURE_STORAGE_KEY": secret}
	default:
		return map[string]string{"STORAGE_EMULATOR_HOST": s.addr}
	}
}

// WrongEnv is Env with a wrong secret (S3 and Azure; for GCS, which checks no
// credentials, it is Env).
func (s *Server) WrongEnv() map[string]string {
	switch s.kind {
	case S3:
		return s.envWith(randHex(20))
	case Azure:
		// A valid base64 key of the right length that is not the account's.
		k := []byte(AzuriteKey)
		for i := 0; i < 8; i++ {
			if k[i] == 'A' {
				k[i] = 'B'
			} else {
				k[i] = 'A'
			}
		}
		return s.envWith(string(k))
	default:
		return s.Env()
	}
}

// SetEnv sets Env in the test's environment (t.Setenv: restored when the test ends; not
// for parallel tests).
func (s *Server) SetEnv(t testing.TB) {
	t.Helper()
	for k, v := range s.Env() {
		t.Setenv(k, v)
	}
}

// Secret returns the secret credential (MinIO's root password, Azurite's account key),
// for a test that checks logs never show it; "" for GCS.
func (s *Server) Secret() string { return s.secret }
