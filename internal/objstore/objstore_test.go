package objstore

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServers starts each emulator and puts, gets, replaces and deletes an object.
func TestServers(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			began := time.Now()
			s := Start(t, kind)
			t.Logf("%s: started in %v", kind, time.Since(began).Round(time.Millisecond))
			if s.Kind() != kind {
				t.Errorf("Kind() = %q, want %q", s.Kind(), kind)
			}
			if !strings.HasPrefix(s.Endpoint(), "http://127.0.0.1:") {
				t.Errorf("Endpoint() = %q, want loopback http", s.Endpoint())
			}
			b := s.NewBucket(t)
			if n := len(b.Name); n < 3 || n > 63 || strings.ToLower(b.Name) != b.Name {
				t.Errorf("bucket name %q is not valid everywhere", b.Name)
			}
			if got, want := b.URL("a/b"), string(kind)+"://"+b.Name+"/a/b"; got != want {
				t.Errorf("URL = %q, want %q", got, want)
			}
			if b2 := s.NewBucket(t); b2.Name == b.Name {
				t.Errorf("two buckets named %q", b.Name)
			}
			b.Put(t, "dir/x.bin", []byte("first"))
			if got := b.Get(t, "dir/x.bin"); string(got) != "first" {
				t.Errorf("get = %q, want first", got)
			}
			b.Put(t, "dir/x.bin", []byte("second, longer"))
			if got := b.Get(t, "dir/x.bin"); string(got) != "second, longer" {
				t.Errorf("get after replace = %q", got)
			}
			b.Delete(t, "dir/x.bin")
			b.Delete(t, "dir/x.bin") // deleting a missing object is fine
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			if _, err := s.sdk(t).get(ctx, b.Name, "dir/x.bin"); err == nil {
				t.Error("object still there after Delete")
			}
			if kind != GCS && s.Secret() == "" {
				t.Error("no secret")
			}
			for k, v := range s.Env() {
				if wv := s.WrongEnv()[k]; kind != GCS && v == s.Secret() && wv == v {
					t.Errorf("WrongEnv()[%s] is the right secret", k)
				}
			}
		})
	}
}

// TestThrottled checks that the proxy refuses exactly n requests with the cloud's
// throttling answer, then forwards: first with plain HTTP, then with the SDK, whose
// retries get through.
func TestThrottled(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			s := Start(t, kind)
			b := s.NewBucket(t)
			b.Put(t, "k", []byte("through the proxy"))
			const n = 3
			params, refused := s.Throttled(t, n)
			var endpoint string
			for k, v := range params {
				if strings.HasSuffix(k, "-endpoint") {
					endpoint = v
				}
			}
			if endpoint == "" || endpoint == s.Endpoint() {
				t.Fatalf("params %v: no proxy endpoint", params)
			}
			wantStatus, wantBody := map[Kind]int{S3: 503, Azure: 503, GCS: 429}[kind],
				map[Kind]string{S3: "<Code>SlowDown</Code>", Azure: "<Code>ServerBusy</Code>", GCS: `"reason":"rateLimitExceeded"`}[kind]
			hc := &http.Client{Timeout: 10 * time.Second}
			for i := 0; i < n+1; i++ {
				resp, err := hc.Get(endpoint + "/" + b.Name + "/k")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if i < n {
					if resp.StatusCode != wantStatus || !bytes.Contains(body, []byte(wantBody)) {
						t.Errorf("request %d: %d %s, want %d with %s", i, resp.StatusCode, body, wantStatus, wantBody)
					}
					if kind == Azure && resp.Header.Get("x-ms-error-code") != "ServerBusy" {
						t.Errorf("request %d: x-ms-error-code %q", i, resp.Header.Get("x-ms-error-code"))
					}
				} else if resp.StatusCode == wantStatus && bytes.Contains(body, []byte(wantBody)) {
					t.Errorf("request %d refused too", i)
				}
			}
			if got := refused(); got != n {
				t.Errorf("refused() = %d, want %d", got, n)
			}

			// Through the SDK (the harness's client, with short retries): one refusal,
			// then the signed request reaches the server through the proxy.
			params, refused = s.Throttled(t, 1)
			for k, v := range params {
				if strings.HasSuffix(k, "-endpoint") {
					endpoint = v
				}
			}
			c, err := s.clientFor(endpoint)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			data, err := c.get(ctx, b.Name, "k")
			if err != nil || string(data) != "through the proxy" {
				t.Errorf("get through the proxy: %q, %v", data, err)
			}
			if got := refused(); got != 1 {
				t.Errorf("refused() = %d, want 1", got)
			}
		})
	}
}

// TestRequests checks that MinIO's own metrics count a GetObject and its bytes.
func TestRequests(t *testing.T) {
	s := Start(t, S3)
	b := s.NewBucket(t)
	data := bytes.Repeat([]byte("0123456789"), 1000)
	b.Put(t, "obj", data)
	before, sentBefore := s.Requests(t)
	if before["PutObject"] < 1 || before["PutBucket"] < 1 {
		t.Errorf("before: %v, want PutObject and PutBucket counted", before)
	}
	b.Get(t, "obj")
	after, sentAfter := s.Requests(t)
	if d := after["GetObject"] - before["GetObject"]; d != 1 {
		t.Errorf("GetObject went from %v to %v, want one more", before["GetObject"], after["GetObject"])
	}
	if d := sentAfter - sentBefore; d < float64(len(data)) {
		t.Errorf("bytes sent grew by %v, want at least %d", d, len(data))
	}
	again, sentAgain := s.Requests(t)
	if again["GetObject"] != after["GetObject"] || sentAgain != sentAfter {
		t.Errorf("scraping the metrics changed them: %v %v -> %v %v", after, sentAfter, again, sentAgain)
	}
	t.Logf("requests %v, bytes sent %v", again, sentAgain)
}

func TestParseSample(t *testing.T) {
	name, labels, v, ok := parseSample(`minio_api_requests_total{name="GetObject",server="127.0.0.1:9000",type="s3",x="a,\"b"} 3`)
	if !ok || name != "minio_api_requests_total" || v != 3 || labels["name"] != "GetObject" || labels["type"] != "s3" || labels["x"] != `a,"b` {
		t.Errorf("got %q %v %v %v", name, labels, v, ok)
	}
	name, _, v, ok = parseSample(`up 1.5e3`)
	if !ok || name != "up" || v != 1500 {
		t.Errorf("got %q %v %v", name, v, ok)
	}
	m, sent, err := parseRequests(strings.NewReader("# HELP x\n" +
		`minio_api_requests_total{name="GetObject",type="s3"} 2` + "\n" +
		`minio_api_requests_total{name="GetObject",type="sftp"} 7` + "\n" +
		`minio_api_requests_traffic_sent_bytes{type="s3"} 100` + "\n"))
	if err != nil || m["GetObject"] != 2 || sent != 100 {
		t.Errorf("parseRequests = %v %v %v", m, sent, err)
	}
	if m, sent, err := parseRequests(strings.NewReader("")); err != nil || len(m) != 0 || sent != 0 {
		t.Errorf("empty page (a fresh server's): %v %v %v", m, sent, err)
	}
}
