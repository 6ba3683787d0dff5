package runner

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/playhead/playhead/bench/report"
)

// System is one column of a comparison: a system under test (playhead, rclone) or a
// ceiling (the link's or the disk's limit) and when it applies.
type System struct {
	// Info is the report's description of the system; Info.Unavailable set means it
	// cannot run here, and every case says so.
	Info report.System
	// SUT mounts it. Nil only when Info.Unavailable is set.
	SUT SUT
	// NotFor returns why the system means nothing for a scenario, "" when it applies.
	// Nil means it applies to every scenario.
	NotFor func(scenario string) string
	// NeedsFiles says it reads the origin's files from disk (MountRequest.FilesDir),
	// so the runner writes them there even when the origin is the built-in one.
	NeedsFiles bool
}

// ErrNoDaemon is what Mounted.PeakRSS and CPU return for a system with no daemon of its
// own (a ceiling read in this process): the figures are then absent, not an error.
var ErrNoDaemon = errors.New("no daemon")

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
	OriginURL string // http://HOST:PORT/, the link in front of the origin (or MinIO's S3 API)
	CacheDir  string // the block cache; reused by a second Mount in the same trial
	Dir       string // the mountpoint
	ReadyFile string // origin path (slash-separated) whose stat proves the mount answers

	// Scenario is the name of the scenario the mount is for. Systems under test must not
	// look at it; a ceiling picks how it reads from it (a plain client that knows the
	// access pattern is the limit the others are read against).
	Scenario string
	// Files are the case's origin paths and their sizes, for ceilings that need not ask.
	Files map[string]int64
	// FilesDir holds the origin's files on disk (origin paths below it), when the origin
	// serves from disk or a system asked for them (System.NeedsFiles); else empty.
	FilesDir string
	// Bucket is set when the origin is an S3 bucket (--origin s3): OriginURL is then the
	// S3 endpoint through the link, and systems mount the bucket, not an HTTP directory.
	Bucket *Bucket
}

// Mounted is a running mount.
type Mounted interface {
	// FS is the origin's files as the mount serves them, by origin path (os.DirFS of
	// the mountpoint, for a real mount). Its files must implement io.ReaderAt.
	FS() fs.FS
	// PeakRSS is the daemon's peak resident memory so far, in bytes, or ErrNoDaemon.
	PeakRSS() (int64, error)
	// CPU is the user plus system CPU time the daemon has used so far, or ErrNoDaemon.
	CPU() (time.Duration, error)
	// Unmount stops the daemon and leaves nothing mounted, even when the daemon has to be
	// killed; its error says what went wrong (the daemon's exit status, a forced kill).
	Unmount() error
}
