package vfs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/httpsrc"
	"github.com/playhead/playhead/source/localsrc"
)

// OpenSource turns a SOURCE argument into a Source: an http:// or https:// URL, a
// file:// URL, or a local directory path. It does no I/O for URLs; see ProbeSource.
func OpenSource(spec string) (source.Source, error) { return OpenSourceTimeout(spec, 0) }

// OpenSourceTimeout is OpenSource for a mount whose I/O timeout (fetch.Options.IOTimeout)
// is ioTimeout: an HTTP source then bounds its metadata requests (HEAD, listings) by the
// same time as data, so stat and readdir fail as promptly as reads. Zero means the HTTP
// source's default.
func OpenSourceTimeout(spec string, ioTimeout time.Duration) (source.Source, error) {
	switch {
	case spec == "":
		return nil, fmt.Errorf("playhead: empty source: give a directory, a file:// URL or an http(s):// URL")
	case strings.HasPrefix(spec, "http://"), strings.HasPrefix(spec, "https://"):
		o := httpsrc.DefaultOptions()
		if ioTimeout > 0 {
			o.Timeout = ioTimeout
		}
		return httpsrc.New(spec, o)
	case strings.Contains(spec, "://"):
		if strings.HasPrefix(spec, "file://") {
			return localsrc.New(spec)
		}
		return nil, fmt.Errorf("playhead: unsupported source %q: want a directory, file:// or http(s):// URL", spec)
	default:
		return localsrc.New(spec)
	}
}

// prober is implemented by sources that can check their origin up front.
type prober interface {
	Probe(ctx context.Context) error
}

// ProbeSource checks that the origin answers, so that a mount fails at once with a clear
// message instead of mounting an empty tree. Sources without a probe list their root.
func ProbeSource(ctx context.Context, src source.Source) error {
	if p, ok := src.(prober); ok {
		return p.Probe(ctx)
	}
	if _, err := src.List(ctx, ""); err != nil {
		return fmt.Errorf("playhead: cannot list %s: %w", src, err)
	}
	return nil
}
