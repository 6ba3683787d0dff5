package objstore

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// MinIO's own request metrics (metrics v3, served without auth as the server runs with
// MINIO_PROMETHEUS_AUTH_TYPE=public). They are counted as requests end, not cached: a
// scrape right after a request shows it.
const (
	metricsPath = "/minio/metrics/v3/api/requests"
	// A series appears with its first count: a fresh server's page is empty, and one that
	// has sent no body yet has no sentMetric.
	//
	// requestsMetric has one series per S3 API, label name="GetObject", "HeadObject",
	// "ListObjectsV2", "PutObject", "PutBucket", ...: every request, failed ones too
	// (those are also in minio_api_requests_errors_total).
	requestsMetric = "minio_api_requests_total"
	// sentMetric is the bytes of every response body MinIO sent: object data, and also
	// listings and XML error bodies.
	sentMetric = "minio_api_requests_traffic_sent_bytes"
)

// Requests returns MinIO's own count of the S3 requests it served, by API name
// ("GetObject", "HeadObject", "ListObjectsV2", ...), and the bytes of response bodies it
// sent, since it started. The harness's own requests (NewBucket: PutBucket, Put:
// PutObject, Delete: DeleteObject) are counted too, so compare two calls rather than
// one with zero. Bytes sent include listings and error bodies: that no object data left
// the server shows best as an unchanged byAPI["GetObject"]. MinIO only: other kinds
// fail the test.
func (s *Server) Requests(t testing.TB) (byAPI map[string]float64, bytesSent float64) {
	t.Helper()
	if s.kind != S3 {
		t.Fatalf("objstore: Requests is for MinIO (s3), not %s", s.kind)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr+metricsPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("objstore: MinIO metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		t.Fatalf("objstore: MinIO metrics: %s: %s", resp.Status, b)
	}
	byAPI, bytesSent, err = parseRequests(resp.Body)
	if err != nil {
		t.Fatalf("objstore: MinIO metrics: %v", err)
	}
	return byAPI, bytesSent
}

// parseRequests reads the request counts and bytes sent of type="s3" out of Prometheus
// text exposition.
func parseRequests(r io.Reader) (byAPI map[string]float64, bytesSent float64, err error) {
	byAPI = make(map[string]float64)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, ok := parseSample(line)
		if !ok || (name != requestsMetric && name != sentMetric) || labels["type"] != "s3" {
			continue
		}
		if name == sentMetric {
			bytesSent += value
		} else if api := labels["name"]; api != "" {
			byAPI[api] += value
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	return byAPI, bytesSent, nil
}

// parseSample splits `name{a="x",b="y"} value [timestamp]`.
func parseSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	labels = map[string]string{}
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		name = line[:i]
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return "", nil, 0, false
		}
		for _, kv := range splitLabels(line[i+1 : j]) {
			k, v, found := strings.Cut(kv, "=")
			if !found {
				return "", nil, 0, false
			}
			uv, err := strconv.Unquote(v)
			if err != nil {
				return "", nil, 0, false
			}
			labels[k] = uv
		}
		rest = line[j+1:]
	} else {
		var found bool
		name, rest, found = strings.Cut(line, " ")
		if !found {
			return "", nil, 0, false
		}
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return "", nil, 0, false
	}
	return name, labels, v, true
}

// splitLabels splits a="x",b="y,z" at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	inQuote, esc, start := false, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case esc:
			esc = false
		case c == '\\':
			esc = true
		case c == '"':
			inQuote = !inQuote
		case c == ',' && !inQuote:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
