// Package fusefs is the FUSE edge of playhead: it presents a vfs.FS as a read-only
// filesystem through go-fuse's node API. It holds no caching or read-ahead logic of its
// own; every read goes to a vfs.File, whose policy sees the kernel's reads as they come.
//
// Traps:
//   - Lookup and Getattr must report the real size: the kernel trusts it, and a zero size
//     makes every read return EOF without asking us.
//   - The kernel sends one sequential scan's reads from several threads, out of order
//     (async reads); the read-ahead policy is built for that, so SyncRead stays off.
//   - Page-cache data is kept across opens (FOPEN_KEEP_CACHE) only when the pages are
//     known to hold the opened version (pages.go), so a replaced object is never
//     served from stale pages; a change found later drops them (notify.go).
//   - Errors become syscall.Errno in exactly one place: errno.
package fusefs

import (
	"context"
	"errors"
	"hash/fnv"
	"io"
	"path"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/vfs"
)

// dirNode is a directory of the source.
type dirNode struct {
	fs.Inode
	vfs   *vfs.FS
	path  string
	ttl   time.Duration
	owner Owner
}

// fileNode is a file of the source.
type fileNode struct {
	fs.Inode
	vfs   *vfs.FS
	path  string
	ttl   time.Duration
	owner Owner

	pages pageState // which version the kernel's pages of this file hold (pages.go)
}

// handle is one open of a file.
type handle struct {
	f      *vfs.File
	node   *fileNode
	direct bool // opened with FOPEN_DIRECT_IO; set before Open returns, then read-only
}

var (
	_ fs.NodeLookuper   = (*dirNode)(nil)
	_ fs.NodeReaddirer  = (*dirNode)(nil)
	_ fs.NodeGetattrer  = (*dirNode)(nil)
	_ fs.NodeStatfser   = (*dirNode)(nil)
	_ fs.NodeOpener     = (*fileNode)(nil)
	_ fs.NodeGetattrer  = (*fileNode)(nil)
	_ fs.FileReader     = (*handle)(nil)
	_ fs.FileReleaser   = (*handle)(nil)
	_ fs.NodeSetattrer  = (*fileNode)(nil)
	_ fs.NodeOpendirer  = (*dirNode)(nil)
	_ fs.InodeEmbedder  = (*dirNode)(nil)
	_ fs.NodeAccesser   = (*fileNode)(nil)
	_ fs.NodeGetxattrer = (*fileNode)(nil)
)

// Root returns the root node for fsys. ttl is how long the kernel may cache names and
// attributes (the listing TTL); owner owns every node.
func Root(fsys *vfs.FS, ttl time.Duration, owner Owner) fs.InodeEmbedder {
	root := &dirNode{vfs: fsys, path: "", ttl: ttl, owner: owner}
	fsys.OnChange(root.changed)
	return root
}

// inodeNumber gives every path a stable inode number, so tools that key on st_ino
// (rsync, media scanners) see the same file across lookups.
func inodeNumber(p string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(p))
	return h.Sum64() | 1 // 1 is the root's
}

// fillAttr describes e at p with o's ownership. Its times are all e.Time(): the origin
// keeps no access or change time apart from the modification time.
func fillAttr(e source.Entry, p string, o Owner, a *fuse.Attr) {
	a.Ino = inodeNumber(p)
	if e.IsDir {
		a.Mode = syscall.S_IFDIR | o.dirMode()
		a.Nlink = 2
	} else {
		a.Mode = syscall.S_IFREG | o.fileMode()
		a.Nlink = 1
		a.Size = uint64(max(e.Version.Size, 0))
		a.Blocks = (a.Size + 511) / 512
	}
	if t := e.Time(); !t.IsZero() {
		a.SetTimes(&t, &t, &t)
	}
	a.Uid, a.Gid = o.UID, o.GID
	a.Blksize = 1 << 20
}

func (d *dirNode) child(name string) string { return path.Join(d.path, name) }

// Lookup implements fs.NodeLookuper.
func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p := d.child(name)
	e, err := d.vfs.Stat(ctx, p)
	if err != nil {
		return nil, errno(err)
	}
	fillAttr(e, p, d.owner, &out.Attr)
	out.SetEntryTimeout(d.ttl)
	out.SetAttrTimeout(d.ttl)
	var node fs.InodeEmbedder
	mode := uint32(syscall.S_IFREG)
	if e.IsDir {
		node = &dirNode{vfs: d.vfs, path: p, ttl: d.ttl, owner: d.owner}
		mode = syscall.S_IFDIR
	} else {
		node = &fileNode{vfs: d.vfs, path: p, ttl: d.ttl, owner: d.owner}
	}
	return d.NewInode(ctx, node, fs.StableAttr{Mode: mode, Ino: inodeNumber(p)}), 0
}

// Opendir implements fs.NodeOpendirer: fail early for a directory that is gone.
func (d *dirNode) Opendir(ctx context.Context) syscall.Errno {
	_, err := d.vfs.ReadDir(ctx, d.path)
	return errno(err)
}

// Readdir implements fs.NodeReaddirer.
func (d *dirNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	list, err := d.vfs.ReadDir(ctx, d.path)
	if err != nil {
		return nil, errno(err)
	}
	out := make([]fuse.DirEntry, 0, len(list))
	for _, e := range list {
		m := uint32(syscall.S_IFREG)
		if e.IsDir {
			m = syscall.S_IFDIR
		}
		out = append(out, fuse.DirEntry{Name: e.Name, Mode: m, Ino: inodeNumber(d.child(e.Name))})
	}
	return fs.NewListDirStream(out), 0
}

// Getattr implements fs.NodeGetattrer.
func (d *dirNode) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	e, err := d.vfs.Stat(ctx, d.path) // the root never fails: it stats while the origin is away
	if err != nil {
		return errno(err)
	}
	fillAttr(e, d.path, d.owner, &out.Attr)
	if d.path == "" {
		out.Ino = 1
	}
	out.SetTimeout(d.ttl)
	return 0
}

// Statfs implements fs.NodeStatfser: report an empty, read-only filesystem rather than
// zeros that make df and some players think the mount is broken.
func (d *dirNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	out.Bsize = 1 << 20
	out.Frsize = 1 << 20
	out.NameLen = 255
	return 0
}

// Getattr implements fs.NodeGetattrer. Through an open handle (fstat) it describes the
// version fixed at open, without asking the origin.
func (n *fileNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := fh.(*handle); ok && h != nil {
		fillAttr(h.f.Entry(), n.path, n.owner, &out.Attr)
		return 0
	}
	e, err := n.vfs.Stat(ctx, n.path)
	if err != nil {
		return errno(err)
	}
	fillAttr(e, n.path, n.owner, &out.Attr)
	out.SetTimeout(n.ttl)
	return 0
}

// Setattr implements fs.NodeSetattrer: the filesystem is read-only.
func (n *fileNode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

// Access implements fs.NodeAccesser: reading is allowed, writing is not.
func (n *fileNode) Access(ctx context.Context, mask uint32) syscall.Errno {
	if mask&2 != 0 { // W_OK
		return syscall.EROFS
	}
	return 0
}

// Getxattr implements fs.NodeGetxattrer: no extended attributes (answered here so the
// kernel's security-label lookups on every read do not reach the origin).
func (n *fileNode) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENODATA
}

// Open implements fs.NodeOpener.
func (n *fileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC|syscall.O_APPEND) != 0 {
		return nil, 0, syscall.EROFS
	}
	f, err := n.vfs.Open(ctx, n.path)
	if err != nil {
		return nil, 0, errno(err)
	}
	h := &handle{f: f, node: n}
	fl := n.pages.open(h)
	if fl&fuse.FOPEN_KEEP_CACHE != 0 {
		// The kernel may answer this handle's reads of the head from the pages an
		// earlier handle filled; its first read here may then be a seek to play from.
		h.f.ResumeElsewhere()
	}
	return h, fl, 0
}

// Read implements fs.FileReader. The answer is the fetch scheduler's block buffers
// themselves (see viewResult), not a copy of them in dest.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	v, err := h.f.ReadView(ctx, off, len(dest))
	if err != nil && err != io.EOF {
		v.Release()
		return nil, errno(err)
	}
	return &viewResult{v: v}, 0
}

// Release implements fs.FileReleaser.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.node.pages.release(h)
	h.f.Close()
	return 0
}

// errno is the one place where errors become errno values.
func errno(err error) syscall.Errno {
	switch {
	case err == nil, err == io.EOF:
		return 0
	case errors.Is(err, source.ErrChanged): // before ErrNotFound: a vanished object is a change
		return syscall.ESTALE
	case errors.Is(err, source.ErrNotFound):
		return syscall.ENOENT
	case errors.Is(err, source.ErrPermission):
		return syscall.EACCES
	case errors.Is(err, source.ErrNotDir):
		return syscall.ENOTDIR
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	default:
		return syscall.EIO
	}
}
