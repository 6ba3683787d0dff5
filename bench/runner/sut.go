package runner

import (
	"context"
	"io/fs"
	"time"
)

// SUT is a system under test: something that mounts an HTTP origin on a directory.
type SUT interface {
	// Mount mounts req.OriginURL with its block cache in req.CacheDir at req.Dir (an
	// existing empty directory) and returns once a stat of req.ReadyFile (an origin path)
	// through the mount succeeds, or fails with an error that says why (the daemon's own
	// words included). ctx bounds the wait, not the mount's life.
	Mount(ctx context.Context, req MountRequest) (Mounted, error)
}

// MountRequest is what to mount, and where.
type MountRequest struct {
	OriginURL string // http://HOST:PORT/, the link in front of the origin
	CacheDir  string // the block cache; reused by a second Mount in the same trial
	Dir       string // the mountpoint
	ReadyFile string // origin path (slash-separated) whose stat proves the mount answers
}

// Mounted is a running mount.
type Mounted interface {
	// FS is the origin's files as the mount serves them, by origin path (os.DirFS of
	// the mountpoint, for a real mount). Its files must implement io.ReaderAt.
	FS() fs.FS
	// PeakRSS is the daemon's peak resident memory so far, in bytes.
	PeakRSS() (int64, error)
	// CPU is the user plus system CPU time the daemon has used so far.
	CPU() (time.Duration, error)
	// Unmount stops the daemon and leaves nothing mounted, even when the daemon has to be
	// killed; its error says what went wrong (the daemon's exit status, a forced kill).
	Unmount() error
}
