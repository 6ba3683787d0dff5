package httpsrc

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/playhead/playhead/source/internal/spare"
)

// Transport tuning. Each constant bounds one step of reaching the origin.
const (
	// dialTimeout bounds the TCP connect: several round trips of the slowest link we aim
	// at, after which the origin is as good as unreachable.
	dialTimeout = 10 * time.Second
	// tcpKeepAlive probes idle connections so a dead one is noticed before it is reused.
	tcpKeepAlive = 30 * time.Second
	// tlsHandshakeTimeout bounds the TLS handshake (two round trips plus crypto).
	tlsHandshakeTimeout = 10 * time.Second
	// idleConnTimeout closes pooled connections unused this long; servers commonly close
	// theirs after 60-75s, and a connection the server closed fails on reuse.
	idleConnTimeout = 55 * time.Second
	// readBufferSize is the per-connection read buffer: 64 KiB moves a body in a sixteenth
	// of the read calls of the 4 KiB default.
	readBufferSize = 64 << 10
)

// newTransport builds the transport for opts (defaults filled in).
// Connections it dials are counted in spare.
func newTransport(opts Options, spares *spare.Conns) *http.Transport {
	dialer := &net.Dialer{Timeout: dialTimeout, KeepAlive: tcpKeepAlive}
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         spares.CountDials(dialer.DialContext),
		MaxIdleConns:        0, // no global cap: MaxIdleConnsPerHost is the limit that matters
		MaxIdleConnsPerHost: opts.MaxIdleConnsPerHost,
		IdleConnTimeout:     idleConnTimeout,
		TLSHandshakeTimeout: tlsHandshakeTimeout,
		// A non-nil TLS config and no ForceAttemptHTTP2 keep the transport on HTTP/1.1
		// (see the package comment).
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     false,
		DisableCompression:    true,
		DisableKeepAlives:     false,
		ResponseHeaderTimeout: opts.Timeout,
		ExpectContinueTimeout: time.Second,
		ReadBufferSize:        readBufferSize,
	}
}
