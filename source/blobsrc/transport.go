package blobsrc

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/internal/spare"
)

// The SDKs get a transport of ours instead of their defaults, for three reasons:
//   - Parallel range streams need as many idle connections as streams: the AWS SDK
//     keeps 10 per host, so sixteen streams would close six connections after every part
//     and dial six anew, a round trip (and on real S3 a TLS handshake) each.
//   - HTTP/1.1 only: object stores cap each connection, and ranges multiplexed on one
//     HTTP/2 connection would share its cap.
//   - Spare connections (source/internal/spare): the dials are counted, so a range after
//     a seek finds a warm connection instead of paying for the dial.
const (
	dialTimeout     = 10 * time.Second
	tcpKeepAlive    = 30 * time.Second
	tlsTimeout      = 10 * time.Second
	idleConnTimeout = 55 * time.Second // under the 60-75 s after which servers close theirs
	// maxIdlePerHost is above the fetcher's most parallel streams (16) plus spares.
	maxIdlePerHost = 64
	readBufferSize = 64 << 10
)

// newTransport returns the transport every request of a source goes through.
// responseTimeout bounds the wait for an answer's headers.
func newTransport(spares *spare.Conns, responseTimeout time.Duration) *http.Transport {
	dialer := &net.Dialer{Timeout: dialTimeout, KeepAlive: tcpKeepAlive}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           spares.CountDials(dialer.DialContext),
		MaxIdleConnsPerHost:   maxIdlePerHost,
		IdleConnTimeout:       idleConnTimeout,
		TLSHandshakeTimeout:   tlsTimeout,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     false,
		DisableCompression:    true,
		ResponseHeaderTimeout: responseTimeout,
		ExpectContinueTimeout: time.Second,
		ReadBufferSize:        readBufferSize,
	}
}

// warmKey is the key a warm-up HEAD asks for: an object that does not exist answers
// 404 with no body, which costs the origin nothing and leaves the connection idle.
const warmKey = ".playhead-warm-up"

// Warm implements fetch.Warmer, called when a range was dropped early and its connection
// with it: a spare is warmed only if fewer than the spares' target are idle now, so a
// dropped range costs the origin no request when connections enough are left (a rewatch
// served from the cache asks the origin nothing at all).
func (s *Source) Warm(ctx context.Context) error {
	if s.spares != nil {
		s.spares.Check()
	}
	return nil
}

// warmHead sends one HEAD, so an idle connection waits in the pool for the next range.
func (s *Source) warmHead(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.attributes(ctx, s.prefix+warmKey)
	if err = s.mapErr(err); err != nil && !errors.Is(err, source.ErrNotFound) {
		return err
	}
	return nil
}

// startRange marks a range opening for the spare connections and returns the context
// to send it with and the function that marks its end. A source built by
// NewFromBucket has no transport of ours, and no spares.
func (s *Source) startRange(ctx context.Context) (context.Context, func()) {
	if s.spares == nil {
		return ctx, func() {}
	}
	return s.spares.Trace(ctx), s.spares.Busy()
}

// answered is called when a range's answer arrived: its connection is now busy.
func (s *Source) answered() {
	if s.spares != nil {
		s.spares.Check()
	}
}

// Prepare implements fetch.Preparer: n connections dialed for parallel ranges.
func (s *Source) Prepare(n int) {
	if s.spares != nil {
		s.spares.Predial(n)
	}
}
