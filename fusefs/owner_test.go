package fusefs

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

// mountWith mounts mem with o in a temporary directory, like mountMem, but without
// caching listings or attributes, so that every stat shows what the FS says now.
func mountWith(t *testing.T, mem *memsrc.Source, o MountOptions) string {
	t.Helper()
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	opts.Cache.MaxBytes = 64 << 20
	opts.ListTTL = -1
	fsys, err := vfs.New(mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	return mountFS(t, fsys, o)
}

func lstat(t *testing.T, p string) *syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatalf("stat %s: %v", p, err)
	}
	return &st
}

// Every node shows the owner, group and umask asked for, and the origin's times: a
// directory the source gives no time shows its newest entry's once listed.
func TestOwnerAndTimes(t *testing.T) {
	mem := newMem(map[string]int64{"a.bin": 1 << 10})
	mem.AddPattern("dir/b.bin", seed, 10) // the newest: its time is the directory's
	va, _ := mem.Version("a.bin")
	vb, _ := mem.Version("dir/b.bin")
	for _, c := range []struct {
		owner             Owner
		fileMode, dirMode uint32
	}{
		{Owner{UID: 1234, GID: 5678, Umask: 0o027}, 0o440, 0o550},
		{Owner{UID: 0, GID: 0, Umask: 0}, 0o444, 0o555},
		{Owner{UID: 1, GID: 2, Umask: 0o777}, 0, 0}, // nothing for anyone but root
	} {
		dir := mountWith(t, mem, MountOptions{Owner: &c.owner})
		if _, err := os.ReadDir(filepath.Join(dir, "dir")); err != nil {
			t.Fatal(err)
		}
		for _, n := range []struct {
			path  string
			mode  uint32
			mtime time.Time
		}{
			{"", syscall.S_IFDIR | c.dirMode, va.ModTime}, // the root: its newest entry with a time
			{"a.bin", syscall.S_IFREG | c.fileMode, va.ModTime},
			{"dir", syscall.S_IFDIR | c.dirMode, vb.ModTime},
			{"dir/b.bin", syscall.S_IFREG | c.fileMode, vb.ModTime},
		} {
			st := lstat(t, filepath.Join(dir, n.path))
			mtime := time.Unix(st.Mtim.Unix())
			if st.Uid != c.owner.UID || st.Gid != c.owner.GID || st.Mode != n.mode || !mtime.Equal(n.mtime) {
				t.Errorf("owner %+v: %q shows uid %d gid %d mode %#o mtime %v; want uid %d gid %d mode %#o mtime %v",
					c.owner, n.path, st.Uid, st.Gid, st.Mode, mtime.UTC(), c.owner.UID, c.owner.GID, n.mode, n.mtime)
			}
		}
	}
}

// With AllowOther, the kernel lets another user read exactly when the umask leaves the
// "other" bits.
func TestUmaskEnforcedForOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a reader as another user needs root")
	}
	const nobody = 65534
	mem := newMem(map[string]int64{"dir/a.bin": 100})
	for _, c := range []struct {
		umask   uint32
		allowed bool
	}{
		{0o022, true},
		{0o007, false},
		{0o004, false}, // directories searchable, files unreadable
	} {
		dir := mountWith(t, mem, MountOptions{AllowOther: true, Owner: &Owner{UID: 0, GID: 0, Umask: c.umask}})
		// t.TempDir makes its directories 0700: let the reader reach the mountpoint.
		if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd := exec.CommandContext(ctx, "cat", filepath.Join(dir, "dir", "a.bin"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, err := cmd.CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("umask %#o: cat as uid %d still running after 10s", c.umask, nobody)
		}
		var ee *exec.ExitError
		switch {
		case c.allowed && (err != nil || len(out) != 100):
			t.Errorf("umask %#o: cat as uid %d: %v, %d bytes: %.200q", c.umask, nobody, err, len(out), out)
		case !c.allowed && !(errors.As(err, &ee) && strings.Contains(string(out), "Permission denied")):
			t.Errorf("umask %#o: cat as uid %d was not refused: %v: %.200q", c.umask, nobody, err, out)
		}
	}
}
