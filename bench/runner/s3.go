package runner

import (
	"bufio"
	"context"
	"crypto/rand"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/playhead/playhead/bench/scenario"
	"github.com/playhead/playhead/linkemu"
	"github.com/playhead/playhead/origin"
)

// The s3 origin (--origin s3): MinIO, run as a separate process (it is AGPL: never
// linked, only started), serving the scenario files from a bucket on this disk, with
// the link in front of its S3 port as for nginx. Playhead mounts s3://bench/ through the
// link, rclone its s3 backend, and the HTTP ceilings read presigned GET URLs, so every
// system's bytes cross the same link from the same server.

// Settings of the s3 origin.
const (
	// BucketName is the bucket the files are uploaded to.
	BucketName = "bench"
	// BucketRegion is the region every client signs for; MinIO accepts any by default.
	BucketRegion = "us-east-1"
	// minioStartTimeout bounds MinIO's start and the bucket's creation.
	minioStartTimeout = 30 * time.Second
	// seedConcurrency is how many objects are uploaded at once.
	seedConcurrency = 4
	// presignExpiry is how long the ceilings' presigned URLs stay valid: the longest S3
	// allows (7 days) less a margin, far longer than any run.
	presignExpiry = 6 * 24 * time.Hour
	// minioPollQuiet is how often MinIO's counters are read while they settle.
	minioPollQuiet = 50 * time.Millisecond
	// rcloneRemote is the name of the rclone remote the environment defines.
	rcloneRemote = "playheadbench"
)

// MinIO's Prometheus metrics (MINIO_PROMETHEUS_AUTH_TYPE=public): its S3 requests by
// API, counted when each request ends, and the response bytes it sent. The v3 endpoint
// is live; v2's node and cluster endpoints are cached for about 10 s, so a trial's
// counts read there would belong to another trial.
const (
	minioMetricsPath   = "/minio/metrics/v3/api/requests"
	minioRequestsTotal = "minio_api_requests_total"
	minioSentBytes     = "minio_api_requests_traffic_sent_bytes"
	minioS3Label       = `type="s3"`
)

// Bucket is the origin as an S3 bucket (--origin s3), for the systems that read it
// through the S3 API: MountRequest.OriginURL is then the S3 endpoint, the link in front
// of MinIO.
type Bucket struct {
	Name      string
	Region    string
	AccessKey string
	SecretKey string

	// presign returns a presigned URL of method ("GET" or "HEAD") for the object at key,
	// addressed through the link; nil in tests that build a Bucket by hand.
	presign func(ctx context.Context, method, key string) (string, error)
}

// URL is the bucket as a playhead source: s3://NAME/.
func (b *Bucket) URL() string { return "s3://" + b.Name + "/" }

// ObjectURL returns a presigned URL of method for the object at key, for a plain HTTP
// client (the ceilings); a Range header may be added to a GET.
func (b *Bucket) ObjectURL(ctx context.Context, method, key string) (string, error) {
	if b.presign == nil {
		return "", errors.New("bench: the bucket has no presigner")
	}
	return b.presign(ctx, method, key)
}

// PlayheadArgs is playhead's command line for the bucket: the s3 scheme's settings to
// reach MinIO through the link, and nothing else besides the runner's own cache
// directory and log level (the issue measures playhead with no tuning flags).
func (b *Bucket) PlayheadArgs(req MountRequest) []string {
	return []string{"mount", b.URL(), req.Dir, "--cache-dir", req.CacheDir, "--log-level", "warn",
		"--s3-endpoint", endpointOf(req.OriginURL), "--s3-path-style", "--s3-region", b.Region}
}

// PlayheadS3Command describes playhead's mount of the bucket for the report: its
// environment (the keys as placeholders) and command line, extra (--mount-arg) appended.
func PlayheadS3Command(extra []string) string {
	b := &Bucket{Name: BucketName, Region: BucketRegion, AccessKey: "KEY", SecretKey: "SECRET"}
	args := b.PlayheadArgs(MountRequest{OriginURL: "LINK", Dir: "MNT", CacheDir: "CACHE"})
	return strings.Join(b.PlayheadEnv()[:2], " ") + " playhead " + strings.Join(append(args, extra...), " ")
}

// PlayheadEnv is the environment playhead's mount gets besides the runner's (less any
// AWS_ variable, so a developer's own profile or session token cannot interfere): the
// credentials by the AWS SDK's standard variables, and no instance-metadata lookups.
func (b *Bucket) PlayheadEnv() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + b.AccessKey, "AWS_SECRET_ACCESS_KEY=" + b.SecretKey,
		"AWS_EC2_METADATA_DISABLED=true"}
}

// RcloneRemote is rclone's path of the bucket: the remote its environment defines.
func (b *Bucket) RcloneRemote() string { return rcloneRemote + ":" + b.Name }

// RcloneEnv defines rclone's s3 remote for the bucket through MinIO behind the link,
// by rclone's RCLONE_CONFIG_<REMOTE>_<OPTION> variables (no config file).
func (b *Bucket) RcloneEnv(req MountRequest) []string {
	p := "RCLONE_CONFIG_" + strings.ToUpper(rcloneRemote) + "_"
	return []string{p + "TYPE=s3", p + "PROVIDER=Minio", p + "ENDPOINT=" + endpointOf(req.OriginURL),
		p + "ACCESS_KEY_ID=" + b.AccessKey, p + "SECRET_ACCESS_KEY=" + b.SecretKey, p + "REGION=" + b.Region}
}

// endpointOf is an S3 endpoint URL from the link's URL (no trailing slash).
func endpointOf(originURL string) string { return strings.TrimSuffix(originURL, "/") }

// withEnv returns the runner's environment less the variables whose names start with
// one of drop, plus add.
func withEnv(drop []string, add []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(drop, func(p string) bool { return strings.HasPrefix(name, p) }) {
			env = append(env, kv)
		}
	}
	return append(env, add...)
}

// FindMinIO looks for the MinIO server binary: explicit if not empty, else
// $PLAYHEAD_TESTBIN/bin/minio, ~/.cache/playhead/bin/minio (where
// scripts/objstore-servers.sh installs it), else PATH.
func FindMinIO(explicit string) (string, error) {
	candidates := []string{explicit}
	if explicit == "" {
		candidates = nil
		if d := os.Getenv("PLAYHEAD_TESTBIN"); d != "" {
			candidates = append(candidates, filepath.Join(d, "bin", "minio"))
		}
		if home, err := os.UserHomeDir(); err == nil {
			candidates = append(candidates, filepath.Join(home, ".cache", "playhead", "bin", "minio"))
		}
		candidates = append(candidates, "minio")
	}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("bench: --origin s3: MinIO not found (looked for %s); scripts/objstore-servers.sh installs it, "+
		"or give --minio", strings.Join(candidates, ", "))
}

// minioCounts are MinIO's own counters at one moment.
type minioCounts struct {
	requests float64 // S3 requests answered
	sent     float64 // response bytes sent
}

// minioOrigin is MinIO serving the bucket. Its counters are MinIO's own (Prometheus
// metrics, read before and after each measured part, so seeding, the link probe and the
// mounts' start-up are not in them); new connections and the bytes down the link are
// the link's.
type minioOrigin struct {
	addr    string // MinIO's S3 API, direct (not through the link)
	version string
	cmd     *exec.Cmd
	prefix  string // data, certs and config, removed at Close
	out     *tailBuffer
	exited  chan struct{}
	bucket  *Bucket
	client  *s3.Client // direct to MinIO: seeding
	seeded  string     // what seeding did, for the header

	link *linkemu.Link // set by Run once the link is up

	mu        sync.Mutex // guards the marks and the last figures
	mark      minioCounts
	markErr   error // why the last ResetStats could not read MinIO's counters
	connsMark int64
	downMark  int64
	extra     scenario.Figures // the last Stats' figures beyond origin.Stats
	statsErr  error            // why the last Stats could not read MinIO's counters
}

// startMinIO starts MinIO (bin) on loopback with a fresh data directory under tmp, and
// creates the bucket; seed uploads the files.
func startMinIO(ctx context.Context, bin, tmp string) (*minioOrigin, error) {
	prefix, err := os.MkdirTemp(tmp, "playhead-bench-minio-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(prefix)
		}
	}()
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	consolePort, err := freePort()
	if err != nil {
		return nil, err
	}
	user, pass := "playhead-bench", randomHex(16)
	m := &minioOrigin{
		addr:    fmt.Sprintf("127.0.0.1:%d", port),
		version: minioVersion(bin),
		prefix:  prefix,
		out:     &tailBuffer{max: stderrTail},
		exited:  make(chan struct{}),
		bucket:  &Bucket{Name: BucketName, Region: BucketRegion, AccessKey: user, SecretKey: pass},
	}
	m.cmd = exec.Command(bin, "server", "--quiet", "--address", m.addr,
		"--console-address", fmt.Sprintf("127.0.0.1:%d", consolePort),
		"--certs-dir", filepath.Join(prefix, "certs"), filepath.Join(prefix, "data"))
	// No inherited MINIO_ settings (a developer's MINIO_VOLUMES or KMS would change what
	// runs), the root credentials, metrics without a token, and the background scanner
	// at its slowest so it does not read the disk while trials run.
	m.cmd.Env = withEnv([]string{"MINIO_"}, []string{"MINIO_ROOT_USER=" + user, "MINIO_ROOT_PASSWORD=" + pass,
		"MINIO_PROMETHEUS_AUTH_TYPE=public", "MINIO_SCANNER_SPEED=slowest", "MINIO_UPDATE=off"})
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start MinIO: %w", err)
	}
	go func() { m.cmd.Wait(); close(m.exited) }()
	ok = true
	m.client = m.bucket.client("http://"+m.addr, nil)
	if err := m.waitReady(ctx); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// client is an S3 client of the bucket's credentials at endpoint, with the given HTTP
// client (nil: the SDK's). Payloads are sent unsigned (UNSIGNED-PAYLOAD, which MinIO
// accepts over plain HTTP) so an upload is read once, and no checksums are added.
func (b *Bucket) client(endpoint string, hc *http.Client) *s3.Client {
	cfg := aws.Config{
		Region: b.Region,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: b.AccessKey, SecretAccessKey: b.SecretKey, Source: "playhead bench"}, nil
		}),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if hc != nil {
		cfg.HTTPClient = hc
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
		o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
	})
}

// waitReady waits for MinIO's liveness, then creates the bucket (MinIO answers 503 until
// its object layer is up) and checks that its metrics can be read.
func (m *minioOrigin) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, minioStartTimeout)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	var last error
	for {
		select {
		case <-m.exited:
			return fmt.Errorf("bench: MinIO exited at start%s", m.out.quote())
		case <-ctx.Done():
			return fmt.Errorf("bench: MinIO at %s not ready within %v (last: %v)%s", m.addr, minioStartTimeout, last, m.out.quote())
		case <-time.After(readyPoll):
		}
		resp, err := hc.Get("http://" + m.addr + "/minio/health/live")
		if err != nil {
			last = err
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("health: %s", resp.Status)
			continue
		}
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = m.client.CreateBucket(cctx, &s3.CreateBucketInput{Bucket: aws.String(m.bucket.Name)})
		ccancel()
		if err != nil {
			last = fmt.Errorf("create bucket %s: %w", m.bucket.Name, err)
			continue
		}
		break
	}
	if _, err := m.counts(ctx); err != nil {
		return fmt.Errorf("bench: cannot read MinIO's own request counts: %w", err)
	}
	return nil
}

// seed uploads the files (byte for byte the built-in origin's) into the bucket,
// seedConcurrency at a time.
func (m *minioOrigin) seed(ctx context.Context, files map[string]origin.File) error {
	start := time.Now()
	paths := make([]string, 0, len(files))
	var total int64
	for p, f := range files {
		paths = append(paths, p)
		total += f.Size
	}
	slices.Sort(paths)
	next := make(chan string)
	errs := make(chan error, seedConcurrency)
	var wg sync.WaitGroup
	for range seedConcurrency {
		wg.Go(func() {
			for p := range next {
				f := files[p]
				body, err := f.Open(0)
				if err == nil {
					_, err = m.client.PutObject(ctx, &s3.PutObjectInput{
						Bucket:        aws.String(m.bucket.Name),
						Key:           aws.String(p),
						Body:          body,
						ContentLength: aws.Int64(f.Size),
					})
					body.Close()
				}
				if err != nil {
					errs <- fmt.Errorf("bench: upload %s to MinIO: %w%s", p, err, m.out.quote())
					return
				}
			}
		})
	}
	var err error
feed:
	for _, p := range paths {
		select {
		case next <- p:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	if err != nil {
		return err
	}
	m.seeded = fmt.Sprintf("%d objects, %.1f MB, uploaded in %.1f s", len(paths), float64(total)/1e6, time.Since(start).Seconds())
	return nil
}

// setLink puts the link in front: the bucket's presigned URLs address MinIO through it.
func (m *minioOrigin) setLink(link *linkemu.Link, linkURL string) {
	m.link = link
	presigner := s3.NewPresignClient(m.bucket.client(endpointOf(linkURL), nil), s3.WithPresignExpires(presignExpiry))
	var mu sync.Mutex
	cache := map[[2]string]string{}
	m.bucket.presign = func(ctx context.Context, method, key string) (string, error) {
		mu.Lock()
		u, ok := cache[[2]string{method, key}]
		mu.Unlock()
		if ok {
			return u, nil
		}
		var req *v4.PresignedHTTPRequest
		var err error
		switch method {
		case http.MethodGet:
			req, err = presigner.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(m.bucket.Name), Key: aws.String(key)})
		case http.MethodHead:
			req, err = presigner.PresignHeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(m.bucket.Name), Key: aws.String(key)})
		default:
			return "", fmt.Errorf("bench: no presigned %s", method)
		}
		if err != nil {
			return "", fmt.Errorf("bench: presign %s %s: %w", method, key, err)
		}
		mu.Lock()
		cache[[2]string{method, key}] = req.URL
		mu.Unlock()
		return req.URL, nil
	}
}

func (m *minioOrigin) describe() string {
	return fmt.Sprintf("MinIO %s, one drive on this disk, S3 API; bucket %q: %s; origin bytes and requests are MinIO's own counts "+
		"(Prometheus %s: %s, %s), new connections and bytes down the link the link's",
		m.version, m.bucket.Name, m.seeded, minioMetricsPath, minioRequestsTotal, minioSentBytes)
}

// counts reads MinIO's counters.
func (m *minioOrigin) counts(ctx context.Context) (minioCounts, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.addr+minioMetricsPath, nil)
	if err != nil {
		return minioCounts{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return minioCounts{}, fmt.Errorf("MinIO metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return minioCounts{}, fmt.Errorf("MinIO metrics %s: %s", minioMetricsPath, resp.Status)
	}
	var c minioCounts
	sawRequests := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name = line[:i]
			if line[i] == '{' {
				if j := strings.IndexByte(line, '}'); j > i {
					labels = line[i+1 : j]
				}
			}
		}
		if name != minioRequestsTotal && name != minioSentBytes {
			continue
		}
		if !strings.Contains(labels, minioS3Label) {
			continue
		}
		fields := strings.Fields(line[strings.LastIndexByte(line, '}')+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return minioCounts{}, fmt.Errorf("MinIO metrics: %q: %w", line, err)
		}
		if name == minioRequestsTotal {
			c.requests += v // one line per API
			sawRequests = true
		} else {
			c.sent += v
		}
	}
	if err := sc.Err(); err != nil {
		return minioCounts{}, fmt.Errorf("MinIO metrics: %w", err)
	}
	if !sawRequests {
		// Read after the bucket was created: there was at least that request.
		return minioCounts{}, fmt.Errorf("MinIO metrics %s have no %s", minioMetricsPath, minioRequestsTotal)
	}
	return c, nil
}

// settle reads MinIO's counters until they have not changed for quiet (logSettleMax at
// most): MinIO counts a request when it ends, and one whose client went away when it
// notices.
func (m *minioOrigin) settle(quiet time.Duration) (minioCounts, error) {
	ctx := context.Background()
	last, err := m.counts(ctx)
	if err != nil {
		return last, err
	}
	since := time.Now()
	for start := time.Now(); time.Since(start) < logSettleMax; {
		time.Sleep(minioPollQuiet)
		c, err := m.counts(ctx)
		if err != nil {
			return c, err
		}
		if c != last {
			last, since = c, time.Now()
		} else if time.Since(since) >= quiet {
			break
		}
	}
	return last, nil
}

// Stats implements originServer.
func (m *minioOrigin) Stats() origin.Stats {
	c, err := m.settle(logQuiet)
	m.mu.Lock()
	defer m.mu.Unlock()
	var st origin.Stats
	m.extra, m.statsErr = scenario.Figures{}, nil
	if err == nil {
		err = m.markErr
	}
	if err != nil {
		m.statsErr = fmt.Errorf("MinIO's counters: %w", err)
	} else {
		st.Requests = int64(c.requests - m.mark.requests)
		st.BytesWritten = int64(c.sent - m.mark.sent)
	}
	if m.link != nil {
		ls := m.link.Stats()
		st.NewConns = ls.Accepted - m.connsMark
		m.extra[scenario.FigLinkBytesDown] = float64(ls.BytesDown - m.downMark)
	}
	return st
}

// trialFigures implements figuresOrigin: the bytes down the link, and whether MinIO's
// counters could be read.
func (m *minioOrigin) trialFigures() (scenario.Figures, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.extra, m.statsErr
}

// ResetStats implements originServer.
func (m *minioOrigin) ResetStats() {
	c, err := m.settle(resetQuiet)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mark, m.markErr = c, err
	if m.link != nil {
		ls := m.link.Stats()
		m.connsMark, m.downMark = ls.Accepted, ls.BytesDown
	}
}

// Close implements originServer: it stops MinIO and removes its data.
func (m *minioOrigin) Close() error {
	var err error
	select {
	case <-m.exited:
	default:
		m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.exited:
		case <-time.After(killWait):
			m.cmd.Process.Kill()
			<-m.exited
			err = errors.New("bench: MinIO did not stop on SIGTERM; killed")
		}
	}
	os.RemoveAll(m.prefix)
	return err
}

// minioVersion names the binary's release: its Go module version (a MinIO built with
// `go install` says DEVELOPMENT in `minio --version`), else that line.
func minioVersion(path string) string {
	if bi, err := buildinfo.ReadFile(path); err == nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Path + "@" + bi.Main.Version
	}
	out, _ := exec.Command(path, "--version").Output()
	if line := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]); line != "" {
		return line
	}
	return "(version unknown)"
}
