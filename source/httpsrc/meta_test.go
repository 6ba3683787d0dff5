package httpsrc

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// metaServer serves h until the test ends. A handler that blocks must return once a
// channel closed by a cleanup registered after this call is closed (cleanups run last
// first, so the handler returns before the server's Close waits for it).
func metaServer(t *testing.T, h http.HandlerFunc) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// chunkedFile answers for a 1000-byte file without Content-Length. Ranges get a
// Content-Range whose total is total ("*" to withhold it).
func chunkedFile(w http.ResponseWriter, r *http.Request, total string) {
	if r.Header.Get("Range") == "bytes=0-0" {
		if total == "0" {
			w.Header().Set("Content-Range", "bytes */0")
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		w.Header().Set("Content-Range", "bytes 0-0/"+total)
		w.WriteHeader(http.StatusPartialContent)
		w.Write([]byte("x"))
		return
	}
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write([]byte(strings.Repeat("x", 1000)))
	}
}

// Stat of a file whose HEAD has no Content-Length asks for one byte and takes the
// Content-Range total; without a total the size stays unknown (-1), without error.
func TestStatLearnsSizeFromContentRange(t *testing.T) {
	for _, c := range []struct {
		total string
		want  int64
	}{{"1000", 1000}, {"0", 0}, {"*", -1}} {
		t.Run(c.total, func(t *testing.T) {
			url := metaServer(t, func(w http.ResponseWriter, r *http.Request) { chunkedFile(w, r, c.total) })
			s, err := New(url, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			e, err := s.Stat(context.Background(), "f.bin")
			if err != nil {
				t.Fatal(err)
			}
			if e.Version.Size != c.want {
				t.Errorf("size %d, want %d", e.Version.Size, c.want)
			}
		})
	}
}

// Every metadata request is bounded by Options.Timeout: an origin silent before its
// headers, after them, or in the middle of a listing body fails the request within the
// timeout with ErrMetaTimeout (not context.Canceled, which would read as an
// interrupted caller); a listing that keeps making progress takes as long as it needs.
func TestMetadataRequestsBoundedByTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	const bound = timeout + 2*time.Second // slack for -race on a loaded machine
	silent := func(stop <-chan struct{}, r *http.Request) {
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}
	cases := []struct {
		name string
		op   func(s *Source) error
		h    func(stop <-chan struct{}) http.HandlerFunc
	}{
		{"HEAD silent", statOp, func(stop <-chan struct{}) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/" {
					silent(stop, r)
				}
			}
		}},
		{"listing silent after headers", listOp, func(stop <-chan struct{}) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Content-Length", "1000")
					w.WriteHeader(http.StatusOK)
					w.(http.Flusher).Flush()
					silent(stop, r)
				}
			}
		}},
		{"listing silent mid-body", listOp, func(stop <-chan struct{}) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					w.Header().Set("Content-Type", "application/json")
					w.Write([]byte(`[{"name":"a`))
					w.(http.Flusher).Flush()
					silent(stop, r)
				}
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stop := make(chan struct{})
			url := metaServer(t, c.h(stop))
			t.Cleanup(func() { close(stop) })
			s, err := New(url, Options{Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			start := time.Now()
			err = boundedOp(t, func() error { return c.op(s) }, 10*time.Second)
			took := time.Since(start)
			t.Logf("%v after %v", err, took.Round(time.Millisecond))
			if !errors.Is(err, ErrMetaTimeout) || errors.Is(err, context.Canceled) {
				t.Errorf("err %v, want ErrMetaTimeout and not context.Canceled", err)
			}
			if took > bound {
				t.Errorf("took %v, bound %v", took, bound)
			}
		})
	}

	t.Run("slow listing with progress", func(t *testing.T) {
		const slowTimeout = time.Second
		stop := make(chan struct{})
		url := metaServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet {
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte("["))
			// Ten pieces, each after a pause of a fifth of the timeout: the whole takes
			// twice the timeout, but no pause comes near it, even on a loaded machine.
			for i := range 10 {
				select {
				case <-stop:
					return
				case <-time.After(slowTimeout / 5):
				}
				if i > 0 {
					w.Write([]byte(","))
				}
				w.Write([]byte(`{"name":"f` + strconv.Itoa(i) + `","type":"file","size":1}`))
				w.(http.Flusher).Flush()
			}
			w.Write([]byte("]"))
		})
		t.Cleanup(func() { close(stop) })
		s, err := New(url, Options{Timeout: slowTimeout})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var n int
		err = boundedOp(t, func() error {
			l, err := s.List(context.Background(), "")
			n = len(l)
			return err
		}, 20*time.Second)
		if err != nil || n != 10 {
			t.Errorf("slow listing: %d entries, %v; want 10", n, err)
		}
	})
}

func statOp(s *Source) error { _, err := s.Stat(context.Background(), "f.bin"); return err }
func listOp(s *Source) error { _, err := s.List(context.Background(), ""); return err }

// boundedOp runs op, failing the test if it has not returned after limit.
func boundedOp(t *testing.T, op func() error, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("still blocked after %v", limit)
		return nil
	}
}
