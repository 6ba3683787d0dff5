package httpsrc_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/nginxtest"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/httpsrc"
	"github.com/playhead/playhead/source/sourcetest"
)

// The HTTP source keeps the source contract (issue 14) over Go's http.FileServer of a
// directory: an HTML listing without sizes, Last-Modified without ETag.
func TestConformanceFileServer(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T) *sourcetest.Fixture {
		d := sourcetest.NewDir(t)
		files := http.FileServer(http.Dir(d.Root))
		return &sourcetest.Fixture{
			Source: newSource(t, serve(t, files)),
			Put:    d.Put,
			Delete: d.Delete,
			Denied: func(t testing.TB) source.Source {
				return newSource(t, serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					http.Error(w, "forbidden", http.StatusForbidden)
				})))
			},
			Throttled: func(t testing.TB, n int) source.Source {
				var calls atomic.Int64
				return newSource(t, serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if calls.Add(1) <= int64(n) {
						w.Header().Set("Retry-After", "1")
						http.Error(w, "slow down", http.StatusServiceUnavailable)
						return
					}
					files.ServeHTTP(w, r)
				})))
			},
			ListOmitsSizes: true,
		}
	})
}

// The HTTP source keeps the source contract over nginx serving a directory, as users run
// it, with either index: HTML (exact sizes, times to the minute, ETag and Last-Modified
// on files) and JSON (exact sizes and times). nginx refuses (deny all) and throttles
// (503 with Retry-After) itself; the first n requests reach its throttling listener
// through a small proxy that counts them.
func TestConformanceNginx(t *testing.T) {
	nginxtest.Require(t)
	for _, index := range []string{"html", "json"} {
		t.Run(index, func(t *testing.T) {
			sourcetest.Run(t, func(t *testing.T) *sourcetest.Fixture {
				d := sourcetest.NewDir(t)
				ng := nginxtest.Start(t, d.Root)
				base := ng.HTMLURL
				if index == "json" {
					base = ng.JSONURL
				}
				return &sourcetest.Fixture{
					Source: newSource(t, base),
					Put:    d.Put,
					Delete: d.Delete,
					Denied: func(t testing.TB) source.Source { return newSource(t, ng.DeniedURL) },
					Throttled: func(t testing.TB, n int) source.Source {
						busy, ok := proxyTo(t, ng.BusyURL), proxyTo(t, base)
						var calls atomic.Int64
						return newSource(t, serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
							if calls.Add(1) <= int64(n) {
								busy.ServeHTTP(w, r)
								return
							}
							ok.ServeHTTP(w, r)
						})))
					},
				}
			})
		})
	}
}

// newSource returns an HTTP source for the directory URL u, closed when t ends.
func newSource(t testing.TB, u string) *httpsrc.Source {
	t.Helper()
	src, err := httpsrc.New(u, httpsrc.Options{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// serve serves h on a loopback port until t ends and returns its root URL.
func serve(t testing.TB, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// proxyTo returns a reverse proxy to the server at rawURL.
func proxyTo(t testing.TB, rawURL string) http.Handler {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return httputil.NewSingleHostReverseProxy(u)
}
