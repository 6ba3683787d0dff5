package runner

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"time"

	"gocloud.dev/blob/s3blob"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/blobsrc"
	"github.com/playhead/playhead/source/httpsrc"
	"github.com/playhead/playhead/source/sources"
	"github.com/playhead/playhead/vfs"
)

// engineSUT is a fake system under test that is playhead's engine without FUSE: the
// library (vfs over the HTTP source, or the S3 one for a bucket) in this process, its
// files served through an fs.FS. The scenarios then exercise the real read-ahead,
// fetcher and block cache, and the origin counters see real lazy fetching (rewatch: a
// second mount on the same cache), in milliseconds and with no root, no /dev/fuse and
// no child process.
type engineSUT struct{}

func (engineSUT) Mount(ctx context.Context, req MountRequest) (Mounted, error) {
	var src source.Source
	if b := req.Bucket; b != nil {
		// The bucket through the link, as the s3:// scheme opens it.
		bucket, err := s3blob.OpenBucket(ctx, b.client(endpointOf(req.OriginURL), nil), b.Name, nil)
		if err != nil {
			return nil, err
		}
		src = blobsrc.NewFromBucket(bucket, blobsrc.S3, b.URL(), "", 5*time.Second, nil)
	} else {
		hsrc, err := httpsrc.New(req.OriginURL, httpsrc.DefaultOptions())
		if err != nil {
			return nil, err
		}
		src = hsrc
	}
	if err := sources.Probe(ctx, src); err != nil {
		return nil, err
	}
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = req.CacheDir
	opts.Cache.MaxBytes = 1 << 30
	opts.Fetch.IOTimeout = 5 * time.Second // a broken test should not hang for 30 s
	fsys, err := vfs.New(src, opts)
	if err != nil {
		return nil, err
	}
	if _, err := fsys.Stat(ctx, req.ReadyFile); err != nil {
		fsys.Close()
		return nil, fmt.Errorf("engine: not ready: %w", err)
	}
	return &engineMount{fsys: fsys, start: time.Now()}, nil
}

type engineMount struct {
	fsys  *vfs.FS
	start time.Time
}

func (m *engineMount) FS() fs.FS { return engineFS{m.fsys} }

// The daemon's figures of an in-process engine are not its own; these stand-ins let the
// test check that the runner records what Mounted reports.
func (m *engineMount) PeakRSS() (int64, error)     { return 10 << 20, nil }
func (m *engineMount) CPU() (time.Duration, error) { return 25 * time.Millisecond, nil }
func (m *engineMount) Unmount() error              { return m.fsys.Close() }

// engineFS adapts a vfs.FS to fs.FS.
type engineFS struct{ fsys *vfs.FS }

func (e engineFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, err := e.fsys.Open(context.Background(), name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return engineFile{f, name}, nil
}

func (e engineFS) Stat(name string) (fs.FileInfo, error) {
	st, err := e.fsys.Stat(context.Background(), name)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return fileInfo{name: path.Base(name), size: st.Version.Size, dir: st.IsDir}, nil
}

// engineFile is an open vfs.File as an fs.File (it already has Read, ReadAt and Close).
type engineFile struct {
	*vfs.File
	name string
}

func (f engineFile) Stat() (fs.FileInfo, error) {
	return fileInfo{name: path.Base(f.name), size: f.Size()}, nil
}
