package fusefs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/playhead/playhead/vfs"
)

// MountOptions configure the kernel side of a mount.
type MountOptions struct {
	// AllowOther lets users other than the mounting one read the mount (media servers
	// often run as their own user). Needs user_allow_other in /etc/fuse.conf for non-root.
	AllowOther bool
	// MaxRead is the largest read the kernel sends, bytes. Default 1 MiB, the kernel's
	// limit: fewer, larger requests mean fewer trips through the daemon.
	MaxRead int
	// KernelReadAhead is the kernel's own read-ahead for the mount, bytes, and so the
	// size of its reads. Default 256 KiB (the kernel starts FUSE mounts at 128 KiB).
	// Larger values send larger requests, fewer trips through the daemon per byte, but
	// the kernel then reads further ahead of the application on its own, which playhead
	// sees as consumption: after a seek, more is fetched than the player reads (the
	// bench's seek case measures both; docs/BENCHMARKS.md). The mount command's
	// --kernel-read-ahead sets it.
	KernelReadAhead int
	// Debug logs every FUSE request.
	Debug bool
	// Owner owns every file and directory and sets their permission bits. Nil means
	// DefaultOwner(): the mounting user, files 0444, directories 0555.
	Owner *Owner
}

// Defaults for MountOptions; see the fields.
const (
	DefaultMaxRead         = 1 << 20
	DefaultKernelReadAhead = 256 << 10
)

// ErrNoFUSE says the machine cannot mount FUSE filesystems.
var ErrNoFUSE = errors.New("FUSE is not available: /dev/fuse is missing (install fuse3, or load the fuse module)")

// Mount mounts fsys at dir and returns the running server; call Unmount (or
// server.Unmount) to stop. The mountpoint must be an existing directory. A mountpoint left
// stale by a crashed daemon ("transport endpoint is not connected") is cleared first.
func Mount(fsys *vfs.FS, dir string, o MountOptions) (*fuse.Server, error) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, ErrNoFUSE
	}
	if err := ClearStale(dir); err != nil {
		return nil, err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("mountpoint %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("mountpoint %s is not a directory", dir)
	}
	if o.MaxRead == 0 {
		o.MaxRead = DefaultMaxRead
	}
	if o.KernelReadAhead == 0 {
		o.KernelReadAhead = DefaultKernelReadAhead
	}
	owner := DefaultOwner()
	if o.Owner != nil {
		owner = *o.Owner
	}
	if err := owner.Validate(); err != nil {
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	ttl := fsys.Options().ListTTL
	if ttl < 0 {
		ttl = 0
	}
	opts := &fs.Options{
		// Every node fills in its owner and mode itself; these keep go-fuse from replacing
		// uid 0 or a mode a umask cleared to 0 with its own defaults.
		UID:             owner.UID,
		GID:             owner.GID,
		NullPermissions: true,
		EntryTimeout:    &ttl,
		AttrTimeout:     &ttl,
		NegativeTimeout: &ttl,
		MountOptions: fuse.MountOptions{
			AllowOther:   o.AllowOther,
			MaxWrite:     o.MaxRead, // go-fuse derives max_read and max_pages from it
			MaxReadAhead: o.KernelReadAhead,
			FsName:       "playhead:" + fsys.Source().String(),
			Name:         "playhead",
			Options:      []string{"ro", "default_permissions"},
			DirectMount:  os.Geteuid() == 0, // root mounts without fusermount
			Debug:        o.Debug,
		},
	}
	server, err := fs.Mount(dir, Root(fsys, ttl, owner), opts)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	if err := setKernelReadAhead(dir, o.KernelReadAhead); err != nil {
		fsys.Logger().Debug("cannot raise the kernel's read-ahead for the mount; reads stay at 128 KiB", "err", err)
	}
	return server, nil
}

// setKernelReadAhead sets the kernel's read-ahead for the mount's backing device. The
// kernel starts a FUSE mount at 128 KiB whatever the daemon offers (see
// MountOptions.KernelReadAhead for the trade-off). Only root may write the setting;
// elsewhere the mount keeps working with the kernel's default.
func setKernelReadAhead(dir string, bytes int) error {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return err
	}
	dev := uint64(st.Dev)
	major := (dev >> 8) & 0xfff
	minor := (dev & 0xff) | ((dev >> 12) & 0xfff00)
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", major, minor)
	return os.WriteFile(p, []byte(strconv.Itoa(bytes/1024)), 0)
}

// ClearStale detects a mountpoint left behind by a daemon that died without unmounting
// (stat fails with ENOTCONN) and detaches it.
func ClearStale(dir string) error {
	if !IsStale(dir) {
		return nil
	}
	if uerr := syscall.Unmount(dir, syscall.MNT_DETACH); uerr != nil {
		// Not root: fusermount can detach mounts the user owns.
		for _, prog := range []string{"fusermount3", "fusermount"} {
			if exec.Command(prog, "-uz", dir).Run() == nil {
				uerr = nil
				break
			}
		}
		if uerr != nil {
			return fmt.Errorf("mountpoint %s is a stale FUSE mount and cannot be cleared: %w", dir, uerr)
		}
	}
	// The detach is immediate but give the kernel a moment to settle the dentry.
	for i := 0; i < 50; i++ {
		if !IsStale(dir) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("mountpoint %s is still stale after unmounting", dir)
}

// IsStale reports whether dir is a FUSE mount whose daemon is gone. Statfs is asked
// rather than stat, since the kernel may answer stat of the root from its attribute cache.
func IsStale(dir string) bool {
	var st syscall.Statfs_t
	err := syscall.Statfs(dir, &st)
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED)
}
