package blobsrc_test

import (
	"os"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/objstore"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/sources"
	"github.com/playhead/playhead/source/sourcetest"
)

// The conformance suite every source runs, against MinIO, Azurite and fake-gcs-server:
// one server per cloud, a fresh bucket per subtest, the source rooted at a prefix of it
// so that prefixes as roots are checked too.
func TestConformance(t *testing.T) {
	for _, kind := range objstore.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			srv := objstore.Start(t, kind)
			srv.SetEnv(t)
			sourcetest.Run(t, func(t *testing.T) *sourcetest.Fixture {
				b := srv.NewBucket(t)
				const root = "media/"
				f := &sourcetest.Fixture{
					Source: openSource(t, b.URL(root), srv.Params(), nil),
					Put:    func(t testing.TB, p string, data []byte) { b.Put(t, root+p, data) },
					Delete: func(t testing.TB, p string) { b.Delete(t, root+p) },
					Throttled: func(t testing.TB, n int) source.Source {
						params, _ := srv.Throttled(t, n)
						return openSource(t, b.URL(root), params, nil)
					},
					// The SDKs retry throttling themselves (3 attempts on S3, more on
					// Azure and GCS): the reads must succeed.
					ThrottleMustSucceed: true,
				}
				if kind == objstore.GCS {
					f.NoDenied = "fake-gcs-server checks no credentials"
				} else {
					f.Denied = func(t testing.TB) source.Source {
						return openSource(t, b.URL(root), srv.Params(), srv.WrongEnv())
					}
				}
				return f
			})
		})
	}
}

// openSource opens url with params as the command line does, with env set while the
// SDK reads its credentials (at open), then restored.
func openSource(t testing.TB, url string, params map[string]string, env map[string]string) source.Source {
	t.Helper()
	for k, v := range env {
		old, had := os.LookupEnv(k)
		os.Setenv(k, v)
		defer func() {
			if had {
				os.Setenv(k, old)
			} else {
				os.Unsetenv(k)
			}
		}()
	}
	src, err := sources.Builtin.Open(url, sources.Options{IOTimeout: 20 * time.Second, Params: params})
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { src.(interface{ Close() error }).Close() })
	return src
}
