package integration

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/objstore"
	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/sources"
	"github.com/playhead/playhead/vfs"
)

// openURL opens the source of url as the command line does (sources.Builtin, with the
// scheme's settings in params and the mount's I/O timeout) and probes it.
func openURL(t *testing.T, url string, params map[string]string, opts vfs.Options) source.Source {
	t.Helper()
	src, err := sources.Builtin.Open(url, sources.Options{IOTimeout: opts.Fetch.IOTimeout, Params: params})
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	// The command line bounds the probe by the I/O timeout; twice that here, for a
	// loaded machine (and a probe the SDK retries through throttling).
	ctx, cancel := context.WithTimeout(t.Context(), 2*cmp.Or(opts.Fetch.IOTimeout, time.Minute))
	defer cancel()
	if err := sources.Probe(ctx, src); err != nil {
		if c, ok := src.(io.Closer); ok {
			c.Close()
		}
		t.Fatalf("probe %s: %v", url, err)
	}
	return src
}

// mountURL mounts the source of url (an s3:// bucket, say) with params, as the command
// line does; the credentials come from the environment.
func mountURL(t *testing.T, url string, params map[string]string, opts vfs.Options) *mount {
	t.Helper()
	return mountSource(t, openURL(t, url, params, opts), opts)
}

// patternData returns size bytes of the pattern of seed, from offset 0.
func patternData(seed uint64, size int64) []byte {
	p := make([]byte, size)
	pattern.Fill(seed, p, 0)
	return p
}

// Failure cases through a real mount of a bucket on MinIO, every byte checked: what a
// program sees when an object is deleted or replaced under an open file (docs/SEMANTICS.md,
// "Object storage"), and a whole-file read through throttling.

const bucketFileSize = 12 << 20

// bucketCase is one listing TTL of the failure cases.
type bucketCase struct {
	name string
	ttl  time.Duration // vfs.Options.ListTTL: -1 is --list-ttl 0
}

// bucketCases: --list-ttl 0; a short TTL waited out; the default TTL, where only the
// failed read tells playhead of the change.
var bucketCases = []bucketCase{{"ttl0", -1}, {"ttl1s", time.Second}, {"ttldefault", vfs.DefaultListTTL}}

// bucketOptions are the mount options of the failure cases: a read-ahead window of 1 MiB,
// so that the bytes far past a first read of 1 MiB are not cached when the object
// changes, and a read of them must reach the store.
func bucketOptions(t *testing.T, ttl time.Duration) vfs.Options {
	opts := testOptions(t)
	opts.ListTTL = ttl
	opts.ReadAhead.MaxWindow = 1 << 20
	opts.ReadAhead.InitialWindow = 1 << 20
	return opts
}

// startBucketFile starts MinIO with its credentials in the environment, puts key with
// size bytes of the pattern of seed in a fresh bucket, and mounts the bucket.
func startBucketFile(t *testing.T, key string, seed uint64, size int64, opts vfs.Options) (*objstore.Server, *objstore.Bucket, *mount) {
	t.Helper()
	srv := objstore.Start(t, objstore.S3)
	srv.SetEnv(t)
	b := srv.NewBucket(t)
	b.Put(t, key, patternData(seed, size))
	return srv, b, mountURL(t, b.URL(""), srv.Params(), opts)
}

// readExpect reads n bytes at off of f, a handle of the version of seed, after that
// version was replaced or deleted. Every byte returned must be of seed; the read must
// end with io.EOF only at the end of the file, or fail with ESTALE. It returns the bytes
// read and whether it failed with ESTALE.
func readExpect(t *testing.T, f *os.File, seed uint64, size, off int64, n int) (int, bool) {
	t.Helper()
	p := make([]byte, n)
	got, err := f.ReadAt(p, off)
	if bad := badBytes(seed, p[:got], off); bad != 0 {
		t.Fatalf("%s: %d bytes at %d: %d bytes not of the version opened (%v)", f.Name(), got, off, bad, pattern.Verify(seed, p[:got], off))
	}
	want := int(max(min(int64(n), size-off), 0))
	switch {
	case errors.Is(err, syscall.ESTALE):
		return got, true
	case err != nil && !(err == io.EOF && got < n):
		t.Fatalf("%s: %d bytes at %d: %v after %d bytes; want the old bytes or ESTALE", f.Name(), n, off, err, got)
	case got != want:
		t.Fatalf("%s: %d bytes at %d gave %d bytes and no error, want %d", f.Name(), n, off, got, want)
	}
	return got, false
}

// mustStale is readExpect of bytes that cannot be cached: it must fail with ESTALE.
func mustStale(t *testing.T, f *os.File, seed uint64, size, off int64, n int) {
	t.Helper()
	if got, stale := readExpect(t, f, seed, size, off, n); !stale {
		t.Fatalf("%s: %d uncached bytes at %d read (%d bytes) after the object changed; want ESTALE", f.Name(), n, off, got)
	}
}

// sweepOld reads the whole file through f, 1 MiB at a time, after its object changed:
// each read gives the old bytes or ESTALE. It returns the bytes read and the reads that
// failed.
func sweepOld(t *testing.T, f *os.File, seed uint64, size int64) (read int64, stale int) {
	t.Helper()
	for off := int64(0); off < size; off += 1 << 20 {
		got, s := readExpect(t, f, seed, size, off, 1<<20)
		read += int64(got)
		if s {
			stale++
		}
	}
	return read, stale
}

// staleTally adds up what open handles read after their object changed, for a figure.
type staleTally struct {
	cases, reads, stale int
	bytes               int64
}

func (st *staleTally) add(read int64, stale int) {
	st.cases++
	st.reads += int((bucketFileSize + 1<<20 - 1) >> 20) // sweepOld's reads
	st.stale += stale
	st.bytes += read
}

func (st *staleTally) String() string {
	return fmt.Sprintf("%d cases: the old handle's reads of 1 MiB over the whole file gave %.0f MiB of old bytes and %d of %d failed with ESTALE, 0 bytes of another version",
		st.cases, mib(st.bytes), st.stale, st.reads)
}

// An object deleted while a file is open: the handle's reads of bytes not cached fail
// with ESTALE, bytes it read before are the old ones or ESTALE, never other bytes; once
// the deletion is known (TTL passed, or found by the failed read) an open or a stat
// fails with ENOENT.
func TestBucketObjectDeletedWhileOpen(t *testing.T) {
	var tally staleTally
	for _, c := range bucketCases {
		t.Run(c.name, func(t *testing.T) {
			_, b, m := startBucketFile(t, "d/m.bin", 1, bucketFileSize, bucketOptions(t, c.ttl))
			path := m.Path("d/m.bin")
			f := openT(t, path)
			if err := readAtVerify(f, 1, bucketFileSize, 0, 1<<20); err != nil {
				t.Fatalf("before the delete: %v", err)
			}
			b.Delete(t, "d/m.bin")
			if c.ttl == time.Second {
				time.Sleep(c.ttl + 100*time.Millisecond)
			}
			mustStale(t, f, 1, bucketFileSize, 10<<20, 256<<10)
			read, stale := sweepOld(t, f, 1, bucketFileSize)
			t.Logf("after the delete, the open handle read %d bytes of the old object, %d reads of 1 MiB failed with ESTALE", read, stale)
			tally.add(read, stale)
			for _, op := range []struct {
				name string
				do   func() error
			}{
				{"open", func() error {
					g, err := os.Open(path)
					if err == nil {
						g.Close()
					}
					return err
				}},
				{"stat", func() error { _, err := os.Stat(path); return err }},
			} {
				if err := op.do(); !errors.Is(err, syscall.ENOENT) {
					t.Errorf("%s of the deleted object: %v, want ENOENT", op.name, err)
				}
			}
		})
	}
	figure(t, "object deleted under an open file on MinIO, --list-ttl 0, 1 s and default: a read of uncached bytes failed with ESTALE each time; %v; open and stat ENOENT once the deletion was known", &tally)
}

// An object replaced between two reads of one open file: the second read gives the
// old bytes (cached) or ESTALE, never the new object's; a read of bytes not cached
// fails with ESTALE. Once the handle is closed, a new open reads the new object whole
// (at once with --list-ttl 0 or once the change was found, else after the TTL).
func TestBucketObjectReplacedBetweenReads(t *testing.T) {
	var tally staleTally
	var reopened int64
	for _, c := range bucketCases {
		for _, newSize := range []int64{bucketFileSize, bucketFileSize - (3 << 20) + 5} {
			t.Run(fmt.Sprintf("%s/size%d", c.name, newSize), func(t *testing.T) {
				_, b, m := startBucketFile(t, "m.bin", 1, bucketFileSize, bucketOptions(t, c.ttl))
				path := m.Path("m.bin")
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				closed := false
				t.Cleanup(func() {
					if !closed {
						f.Close()
					}
				})
				if err := readAtVerify(f, 1, bucketFileSize, 0, 1<<20); err != nil {
					t.Fatalf("first read: %v", err)
				}
				b.Put(t, "m.bin", patternData(2, newSize))
				if c.ttl == time.Second {
					time.Sleep(c.ttl + 100*time.Millisecond)
				}
				readExpect(t, f, 1, bucketFileSize, 0, 1<<20)
				mustStale(t, f, 1, bucketFileSize, 10<<20, 256<<10)
				read, stale := sweepOld(t, f, 1, bucketFileSize)
				t.Logf("after the replacement, the open handle read %d bytes of the old object, %d reads of 1 MiB failed with ESTALE", read, stale)
				tally.add(read, stale)
				closed = true
				f.Close()
				for range 2 { // each reopen, not only the first, reads only the new object
					verifyWhole(t, path, 2, newSize)
					reopened += newSize
				}
			})
		}
	}
	figure(t, "object replaced (same size or not) between two reads of an open file on MinIO, --list-ttl 0, 1 s and default: a read of uncached bytes failed with ESTALE each time; %v; reopens read %.0f MiB of the new object, every byte right",
		&tally, mib(reopened))
}

// An object read whole, closed, and replaced within the same second by one of the same
// size: only the ETag tells the two apart (the cache files blocks under size and
// second). A new open, once the listing shows the new ETag (here at once: --list-ttl
// 0), reads the new object whole, never the cached blocks of the old one.
func TestBucketObjectReplacedWithinASecond(t *testing.T) {
	const size = 3 << 20
	srv := objstore.Start(t, objstore.S3)
	srv.SetEnv(t)
	b := srv.NewBucket(t)
	opts := bucketOptions(t, -1)
	m := mountURL(t, b.URL(""), srv.Params(), opts)
	// The store's own times, to know that the two versions share a second.
	src := openURL(t, b.URL(""), srv.Params(), opts)
	t.Cleanup(func() { src.(io.Closer).Close() })
	modTime := func(key string) time.Time {
		e, err := src.Stat(t.Context(), key)
		if err != nil {
			t.Fatalf("stat %s: %v", key, err)
		}
		return e.Version.ModTime
	}
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			t.Skip("no two puts within one second in 5 attempts: the machine is too slow")
		}
		key := fmt.Sprintf("s%d.bin", attempt)
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 10*time.Millisecond)))
		b.Put(t, key, patternData(1, size))
		verifyWhole(t, m.Path(key), 1, size) // cached whole, then closed
		first := modTime(key)
		b.Put(t, key, patternData(2, size))
		if second := modTime(key); !second.Equal(first) {
			t.Logf("attempt %d: the versions have times %v and %v; again", attempt, first, second)
			continue
		}
		for range 2 {
			verifyWhole(t, m.Path(key), 2, size)
		}
		figure(t, "object of %d MiB read whole, closed and replaced by one of the same size within the same second (attempt %d): two reopens read the new object whole, every byte right",
			size>>20, attempt+1)
		return
	}
}

// readsThrottled puts an endpoint in front of srv (S3) that sends object reads (GET of
// BUCKET/KEY) through srv.Throttled(t, n) and every other request (the probe, listings,
// HEADs) straight to srv, so that the n refusals land on the reads through the mount.
// It returns the settings that reach it and the count of refusals so far.
func readsThrottled(t *testing.T, srv *objstore.Server, n int) (params map[string]string, refused func() int) {
	t.Helper()
	tp, refused := srv.Throttled(t, n)
	throttled, err := url.Parse(tp["s3-endpoint"])
	if err != nil {
		t.Fatal(err)
	}
	direct, err := url.Parse(srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		to := direct
		bucket, key, _ := strings.Cut(strings.TrimPrefix(r.In.URL.Path, "/"), "/")
		if r.In.Method == http.MethodGet && bucket != "" && key != "" {
			to = throttled
		}
		r.SetURL(to)
		r.Out.Host = r.In.Host // the signature covers it
	}}
	front := httptest.NewServer(rp)
	t.Cleanup(func() {
		front.CloseClientConnections()
		front.Close()
	})
	params = maps.Clone(srv.Params())
	params["s3-endpoint"] = front.URL
	return params, refused
}

// Reads through a mount of a throttling bucket (503 SlowDown, as S3 says it) succeed,
// every byte right: two refusals are retried by the SDK itself, more than its three
// attempts by the fetcher. The SDK backs off from 1 s on throttling (jittered,
// doubling), so a GET it gives up on has taken 1 to 6 s: the mount has the default I/O
// timeout (30 s); with the tests' 5 s, two such GETs in a row fail the read with EIO.
func TestBucketThrottledReadThroughMount(t *testing.T) {
	var runs []string
	for _, n := range []int{0, 2, 6} {
		t.Run(fmt.Sprintf("refuse%d", n), func(t *testing.T) {
			srv := objstore.Start(t, objstore.S3)
			srv.SetEnv(t)
			b := srv.NewBucket(t)
			b.Put(t, "t/m.bin", patternData(5, bucketFileSize))
			params, refused := readsThrottled(t, srv, n)
			opts := testOptions(t)
			opts.Fetch.IOTimeout = vfs.DefaultOptions().Fetch.IOTimeout
			m := mountURL(t, b.URL(""), params, opts)
			start := time.Now()
			verifyWhole(t, m.Path("t/m.bin"), 5, bucketFileSize)
			took := time.Since(start)
			st := m.FS.FetchStats()
			t.Logf("whole-file read of %d MiB through %d refusals in %v (%d range requests, %d retried by the fetcher)",
				bucketFileSize>>20, refused(), took.Round(time.Millisecond), st.Requests, st.Retries)
			if refused() != n {
				t.Errorf("the store refused %d reads, want %d: the reads were not throttled as meant", refused(), n)
			}
			runs = append(runs, fmt.Sprintf("%d refusals %v (%d fetcher retries)", n, took.Round(10*time.Millisecond), st.Retries))
		})
	}
	figure(t, "whole-file reads of %d MiB through a mount of MinIO whose GETs get 503 SlowDown, every byte right: %s",
		bucketFileSize>>20, strings.Join(runs, ", "))
}
