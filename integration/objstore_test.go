package integration

import (
	"cmp"
	"context"
	"io"
	"testing"
	"time"

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
