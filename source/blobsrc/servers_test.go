package blobsrc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/objstore"
	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/sources"
)

// open returns the source for url on srv with params (srv's own when nil), as the
// command line builds it, and checks it like a mount does.
func open(t *testing.T, url string, params map[string]string, timeout time.Duration) (source.Source, error) {
	t.Helper()
	src, err := sources.Builtin.Open(url, sources.Options{IOTimeout: timeout, Params: params})
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() {
		if c, ok := src.(io.Closer); ok {
			c.Close()
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 4*timeout)
	defer cancel()
	return src, sources.Probe(ctx, src)
}

func readAll(t *testing.T, src source.Source, p string, r source.Range, want source.Version) ([]byte, error) {
	t.Helper()
	b, err := src.OpenRange(t.Context(), p, r, want)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	return io.ReadAll(b)
}

// For every cloud: a replaced object is never read under its old version, and the
// new one is read in full; a deleted one is gone. GCS's emulator ignores generation
// conditions, so there the check of the answer's generation is what catches it.
func TestReplacedObjectNeverMixed(t *testing.T) {
	for _, kind := range objstore.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			srv := objstore.Start(t, kind)
			srv.SetEnv(t)
			b := srv.NewBucket(t)
			const size = 3<<20 + 5
			b.Put(t, "m/a.bin", patternBytes(1, 0, size))
			src, err := open(t, b.URL("m"), srv.Params(), 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			e, err := src.Stat(t.Context(), "a.bin")
			if err != nil || e.Version.Size != size || e.Version.ETag == "" {
				t.Fatalf("stat: %+v %v (want size %d and a version tag)", e, err, size)
			}
			es, err := src.List(t.Context(), "")
			if err != nil || len(es) != 1 || !es[0].Version.Same(e.Version) {
				t.Fatalf("listing %+v %v: want the version Stat gave, %v", es, err, e.Version)
			}
			data, err := readAll(t, src, "a.bin", source.Range{Off: 1 << 20, Len: 1 << 20}, e.Version)
			if err != nil || pattern.Verify(1, data, 1<<20) != nil || len(data) != 1<<20 {
				t.Fatalf("read before the change: %d bytes, %v", len(data), err)
			}
			b.Put(t, "m/a.bin", patternBytes(2, 0, size)) // same size, other bytes
			if _, err := readAll(t, src, "a.bin", source.Range{Off: 0, Len: 4096}, e.Version); !errors.Is(err, source.ErrChanged) {
				t.Fatalf("read of the old version after the change: %v, want ErrChanged", err)
			}
			data, err = readAll(t, src, "a.bin", source.Range{Off: 0, Len: -1}, source.AnyVersion)
			if err != nil || len(data) != size || pattern.Verify(2, data, 0) != nil {
				t.Fatalf("read of the new version: %d bytes, %v", len(data), err)
			}
			b.Delete(t, "m/a.bin")
			if _, err := src.Stat(t.Context(), "a.bin"); !errors.Is(err, source.ErrNotFound) {
				t.Fatalf("stat after delete: %v, want ErrNotFound", err)
			}
		})
	}
}

// A mount fails at once, saying why, when the credentials are wrong, the bucket is
// missing or the endpoint refuses; and reads get past throttling by the SDK's retries.
func TestMountTimeFailuresAndThrottling(t *testing.T) {
	for _, kind := range objstore.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			srv := objstore.Start(t, kind)
			b := srv.NewBucket(t)
			b.Put(t, "x.bin", patternBytes(3, 0, 100<<10))
			if kind != objstore.GCS { // the emulator checks no credentials
				for k, v := range srv.WrongEnv() {
					t.Setenv(k, v)
				}
				_, err := open(t, b.URL(""), srv.Params(), 5*time.Second)
				if !errors.Is(err, source.ErrPermission) || !strings.Contains(err.Error(), "check the credentials") {
					t.Errorf("wrong credentials: %v, want a refusal naming the credentials", err)
				}
			}
			srv.SetEnv(t)
			missing := strings.Replace(b.URL(""), b.Name, b.Name+"-missing", 1)
			if _, err := open(t, missing, srv.Params(), 5*time.Second); err == nil || !strings.Contains(err.Error(), "no such bucket") {
				t.Errorf("missing bucket: %v, want \"no such bucket\"", err)
			}
			start := time.Now()
			_, err := open(t, b.URL(""), deadParams(srv), 2*time.Second)
			if err == nil || !strings.Contains(err.Error(), "cannot reach") {
				t.Errorf("endpoint refusing connections: %v, want \"cannot reach\"", err)
			}
			if took := time.Since(start); took > 20*time.Second {
				t.Errorf("the refused mount took %v", took)
			}

			params, refused := srv.Throttled(t, 2)
			src, err := open(t, b.URL(""), params, 10*time.Second)
			if err != nil {
				t.Fatalf("probe through throttling: %v", err)
			}
			data, err := readAll(t, src, "x.bin", source.Range{Off: 0, Len: -1}, source.AnyVersion)
			if err != nil || pattern.Verify(3, data, 0) != nil || len(data) != 100<<10 {
				t.Fatalf("read through throttling: %d bytes, %v", len(data), err)
			}
			if refused() != 2 {
				t.Errorf("the proxy refused %d requests, want 2", refused())
			}
		})
	}
}

// deadParams are srv's settings with an endpoint on a port nothing listens on.
func deadParams(srv *objstore.Server) map[string]string {
	out := map[string]string{}
	for k, v := range srv.Params() {
		if strings.HasSuffix(k, "-endpoint") {
			rest := v[len("http://"):]
			path := ""
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				path = rest[i:]
			}
			v = "http://127.0.0.1:1" + path
		}
		out[k] = v
	}
	return out
}

// A folder of 10,000 objects lists whole (ten pages on S3), in bounded time. The
// figure is printed for docs/RELIABILITY.md; the bound only catches a listing gone
// quadratic, it is not a performance target.
func TestListTenThousandObjects(t *testing.T) {
	srv := objstore.Start(t, objstore.S3)
	srv.SetEnv(t)
	b := srv.NewBucket(t)
	const n = 10000
	start := time.Now()
	var wg sync.WaitGroup
	keys := make(chan string)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				b.Put(t, k, []byte(k))
			}
		}()
	}
	for i := range n {
		keys <- fmt.Sprintf("big/f%05d.bin", i)
	}
	close(keys)
	wg.Wait()
	t.Logf("uploaded %d objects in %v", n, time.Since(start).Round(time.Millisecond))
	src, err := open(t, b.URL(""), srv.Params(), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	es, err := src.List(t.Context(), "big")
	took := time.Since(start)
	if err != nil || len(es) != n {
		t.Fatalf("listed %d entries, %v; want %d", len(es), err, n)
	}
	t.Logf("RELIABILITY TestListTenThousandObjects: a folder of %d objects on MinIO listed in %v (%d pages)", n, took.Round(time.Millisecond), n/1000)
	if took > 30*time.Second {
		t.Errorf("listing took %v", took)
	}
}

// patternBytes returns n bytes of the pattern of seed from off.
func patternBytes(seed uint64, off int64, n int) []byte {
	p := make([]byte, n)
	pattern.Fill(seed, p, off)
	return p
}
