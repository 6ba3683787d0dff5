package fusefs

import (
	"context"
	"log/slog"
	"strings"
	"syscall"
)

// changed is the vfs change hook: the object at p changed or is gone at the origin. The
// kernel's pages and attributes of the file are dropped, and its name looked up again,
// so no handle is served the old object from the kernel's caches and stat shows the new
// one. Called on its own goroutine (never inside a FUSE request): the kernel waits for
// reads of the file's pages in flight before it answers the notify.
func (d *dirNode) changed(p string) {
	parent := &d.Inode
	names := strings.Split(p, "/")
	for _, name := range names[:len(names)-1] {
		if parent = parent.GetChild(name); parent == nil {
			return // the kernel never looked the file up: it caches nothing of it
		}
	}
	name := names[len(names)-1]
	if node := parent.GetChild(name); node != nil {
		logNotify(d, p, "content", node.NotifyContent(0, 0))
	}
	logNotify(d, p, "entry", parent.NotifyEntry(name))
}

func logNotify(d *dirNode, p, what string, errno syscall.Errno) {
	if errno != 0 && errno != syscall.ENOENT {
		d.vfs.Logger().Log(context.Background(), slog.LevelDebug, "kernel cache notify failed", "path", p, "what", what, "err", errno)
	}
}
