package linkemu

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

const (
	// DefaultProbeBytes is how much Probe downloads to measure throughput: 16 MiB is about
	// half a second on the "far" link, long enough that the first round trip and the
	// timer granularity are a few percent of the measurement.
	DefaultProbeBytes = 16 << 20

	// probeWarmRounds is how many tiny GETs Probe times on the warm connection; it keeps
	// the fastest, since scheduling noise only ever adds time.
	probeWarmRounds = 3
)

// ProbeResult is what a link looks like to an HTTP client.
type ProbeResult struct {
	// Connect is the time to first byte of a tiny GET on a new connection: the round trip
	// plus the handshake charge.
	Connect time.Duration
	// RTT is the time to first byte of a tiny GET on the warm connection (the fastest of
	// a few): one round trip plus the origin's own time.
	RTT time.Duration
	// Bytes is the size of the throughput GET's body as received.
	Bytes int64
	// Transfer is the time from the throughput GET's first byte to its last, so the round
	// trip is not counted against the rate.
	Transfer time.Duration
	// Throughput is Bytes/Transfer in bytes per second.
	Throughput float64
}

// String prints the probe in one line, e.g. "rtt 201ms (new connection 402ms), 29.9 MB/s".
func (r ProbeResult) String() string {
	return fmt.Sprintf("rtt %v (new connection %v), %.1f MB/s over %.1f MiB",
		r.RTT.Round(100*time.Microsecond), r.Connect.Round(100*time.Microsecond),
		r.Throughput/1e6, float64(r.Bytes)/(1<<20))
}

// Probe measures the link in front of url with DefaultProbeBytes. See ProbeBytes.
func Probe(ctx context.Context, url string) (ProbeResult, error) {
	return ProbeBytes(ctx, url, DefaultProbeBytes)
}

// ProbeBytes measures the round trip and throughput seen through a link: a ranged GET of one
// byte on a new connection (Connect), then a few on the same, now warm, connection (RTT),
// then a ranged GET of n bytes (Throughput). The origin must serve Range requests; a file
// shorter than n is measured whole. It uses its own connections, closed on return.
func ProbeBytes(ctx context.Context, url string, n int64) (ProbeResult, error) {
	if n <= 0 {
		return ProbeResult{}, fmt.Errorf("linkemu: probe size %d must be positive", n)
	}
	tr := &http.Transport{
		Proxy:               nil,
		DisableCompression:  true, // count the bytes the link carried
		MaxIdleConnsPerHost: 1,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	var res ProbeResult
	for i := range probeWarmRounds + 1 {
		ttfb, _, _, err := timedGet(ctx, client, url, 1)
		if err != nil {
			return res, err
		}
		if i == 0 {
			res.Connect = ttfb
		} else if res.RTT == 0 || ttfb < res.RTT {
			res.RTT = ttfb
		}
	}
	_, body, transfer, err := timedGet(ctx, client, url, n)
	if err != nil {
		return res, err
	}
	res.Bytes, res.Transfer = body, transfer
	if transfer > 0 {
		res.Throughput = float64(body) / transfer.Seconds()
	}
	return res, nil
}

// timedGet GETs the first n bytes of url and returns the time to the response headers, the
// body size and the time from headers to the body's end.
func timedGet(ctx context.Context, client *http.Client, url string, n int64) (ttfb time.Duration, size int64, transfer time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("linkemu: probe %s: %w", url, err)
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=0-%d", n-1))
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("linkemu: probe %s: %w", url, err)
	}
	defer resp.Body.Close()
	headers := time.Now()
	var body io.Reader = resp.Body
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		// The origin ignored Range: read no more than asked, so a probe of a huge file
		// stays a probe. The connection is then not reused.
		body = io.LimitReader(resp.Body, n)
	default:
		return 0, 0, 0, fmt.Errorf("linkemu: probe %s: %s", url, resp.Status)
	}
	size, err = io.Copy(io.Discard, body)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("linkemu: probe %s: body after %d bytes: %w", url, size, err)
	}
	return headers.Sub(start), size, time.Since(headers), nil
}
