package objstore

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Throttled starts a reverse proxy in front of the server that answers the first n
// requests with the cloud's throttling error, then forwards every request, and returns
// the Params that reach the server through it and a func that counts the requests it
// refused so far. The proxy is stopped when the test ends.
//
// The refusals are what each cloud sends when it throttles:
//   - S3: 503 with the XML body <Error><Code>SlowDown</Code>…</Error>.
//   - Azure: 503 with x-ms-error-code: ServerBusy and the XML body
//     <Error><Code>ServerBusy</Code>…</Error>.
//   - GCS: 429 with the JSON API's error body (reason rateLimitExceeded).
//
// Every SDK retries these by itself, with its own jittered backoff (the AWS SDK's
// standard retryer: 3 attempts in all; azcore: 3 retries from 0.8 s; the GCS client:
// for idempotent calls, until its context ends, from about 1 s), so a client sees an
// error only when n exceeds its retries, and one refusal costs it about 0.4 to 0.9 s.
//
// Requests keep their Host header (the S3 signature covers it: MinIO checks it against
// the proxy's address the client signed for), except for GCS: fake-gcs-server routes
// by Host, so they are sent with the server's own.
func (s *Server) Throttled(t testing.TB, n int) (params map[string]string, refused func() int) {
	t.Helper()
	target, err := url.Parse("http://" + s.addr)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	count := 0
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
			if s.kind == GCS {
				r.Out.Host = s.addr
			}
		},
	}
	proxy := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		refuse := count < n
		if refuse {
			count++
		}
		mu.Unlock()
		if refuse {
			s.throttle(w, r)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	proxy.Start()
	t.Cleanup(func() {
		proxy.CloseClientConnections()
		proxy.Close()
	})
	endpoint := proxy.URL
	if s.kind == Azure {
		endpoint += "/" + AzuriteAccount
	}
	return s.paramsFor(endpoint), func() int {
		mu.Lock()
		defer mu.Unlock()
		return count
	}
}

// throttle answers r as the cloud does when it throttles.
func (s *Server) throttle(w http.ResponseWriter, r *http.Request) {
	id := randHex(8)
	h := w.Header()
	var status int
	var body string
	switch s.kind {
	case S3:
		status = http.StatusServiceUnavailable
		h.Set("Content-Type", "application/xml")
		h.Set("x-amz-request-id", id)
		body = `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
			`<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>` +
			`<Resource>` + r.URL.Path + `</Resource><RequestId>` + id + `</RequestId><HostId>playhead-throttle</HostId></Error>`
	case Azure:
		status = http.StatusServiceUnavailable
		h.Set("Content-Type", "application/xml")
		h.Set("x-ms-error-code", "ServerBusy")
		h.Set("x-ms-request-id", id)
		h.Set("x-ms-version", r.Header.Get("x-ms-version"))
		body = "\ufeff" + `<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code>` +
			`<Message>The server is busy.` + "\n" + `RequestId:` + id + "\n" + `Time:` +
			time.Now().UTC().Format("2006-01-02T15:04:05.0000000Z") + `</Message></Error>`
	default:
		status = http.StatusTooManyRequests
		h.Set("Content-Type", "application/json; charset=UTF-8")
		msg := "The rate of requests to this bucket exceeds the rate limit. Please reduce the rate of requests."
		body = fmt.Sprintf(`{"error":{"code":429,"message":%q,"errors":[{"message":%q,"domain":"usageLimits","reason":"rateLimitExceeded"}]}}`, msg, msg)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write([]byte(body))
	}
}
