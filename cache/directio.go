package cache

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Block data can go to and from the data file with direct I/O (O_DIRECT), not through
// the page cache, when the writer asks for it (PutSumDirect).
//
// A block the cache stores has just been handed to a reader, and the kernel keeps what a
// reader of the mount got in the mount's own page cache. A buffered write keeps a second
// copy of every byte in memory, and each 4 KiB of it costs a fresh page, which on a
// virtual machine that backs guest memory on first touch costs several times the copy
// into it. Writing such blocks direct saves that second copy and its CPU (the figures
// are in docs/BENCHMARKS.md).
//
// But a direct write that allocates (every block added to the sparse data file) holds
// the file's lock exclusively on ext4 and may wait for a journal commit, hundreds of
// milliseconds against a few for a buffered write. At playback rates on a slow link the
// write queue would fill behind such waits and read-ahead would wait for room in it,
// freezing the player. So the choice is the caller's, block by block: the
// fetcher asks for direct writes only from a connection delivering far faster than any
// player reads and than a long link carries, and only while its buffered writes fall
// behind (fetch/writer.go): there a writer's wait costs a few milliseconds of a burst
// rather than a frame. A block written direct is read back direct (blockEntry.direct):
// read buffered it would cost the new pages the write saved, and the disk read besides.
//
// A direct transfer needs its buffer, offset and length aligned to what the file system
// reports (statx STATX_DIOALIGN). The fetcher's block buffers are allocations of a
// block's size, which Go's allocator places on page boundaries (not a promise: each
// transfer checks), and blocks sit at multiples of the block size, so whole blocks
// qualify; the last, short block of a file and an unaligned buffer go through the page
// cache, which the kernel keeps coherent with direct transfers on the same file. A file
// system that refuses direct I/O (tmpfs before Linux 6.6, some network and FUSE file
// systems) gets buffered I/O throughout, as does Options.BufferedIO. Blocks found by the
// startup scan are read buffered: correct either way, since the page cache is coherent.

// directHandle opens the data file in dir a second time, for direct I/O, and returns it
// with the alignment its transfers need; nil, 0 if the file system does not take direct
// I/O.
func directHandle(dir string) (*os.File, int) {
	f, err := os.OpenFile(filepath.Join(dir, dataName), os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		return nil, 0
	}
	align := directAlign(int(f.Fd()))
	if align == 0 {
		f.Close()
		return nil, 0
	}
	return f, align
}

// directAlign returns the alignment a direct transfer on fd needs (of memory and of the
// file offset and length, the larger of the two), or 0 if the file system reports that
// it takes none. A kernel without STATX_DIOALIGN (before 6.1) is assumed to need the
// page size, the largest logical block size in use.
func directAlign(fd int) int {
	var st unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &st); err != nil || st.Mask&unix.STATX_DIOALIGN == 0 {
		return os.Getpagesize()
	}
	if st.Dio_offset_align == 0 {
		return 0
	}
	return int(max(st.Dio_mem_align, st.Dio_offset_align))
}

// direct reports whether a transfer of p at off can go through h's direct descriptor.
func (c *Cache) direct(h *fileHandles, p []byte, off int64) bool {
	a := h.align
	return h.direct != nil && !c.noDirect.Load() && len(p) > 0 &&
		len(p)%a == 0 && off%int64(a) == 0 && uintptr(unsafe.Pointer(&p[0]))%uintptr(a) == 0
}

// directFailed notes a direct transfer that the file system refused after all (EINVAL
// for an alignment it did not report, EOPNOTSUPP): the cache goes on with buffered
// I/O, and the caller retries buffered.
func (c *Cache) directFailed(err error) bool {
	if !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.EOPNOTSUPP) {
		return false
	}
	if !c.noDirect.Swap(true) {
		c.log.Info("cache: the file system refused a direct transfer; block data goes through the page cache from now on", "err", err)
	}
	return true
}

// writeData writes a block's data at off of h's data file, with direct I/O if asked and
// possible; wentDirect reports which way it went.
func (c *Cache) writeData(h *fileHandles, data []byte, off int64, direct bool) (wentDirect bool, err error) {
	if direct && c.direct(h, data, off) {
		_, err := c.writeAt(h.direct, data, off)
		if !c.directFailed(err) {
			return err == nil, err
		}
	}
	_, err = c.writeAt(h.data, data, off)
	return false, err
}

// readData fills p from off of h's data file, with direct I/O if the block was written
// so (direct) and p allows.
//
// A direct read never waits for the file's lock: ext4 takes it exclusively for a direct
// write that allocates (every block the cache adds to its sparse file), and such a
// write may wait for a journal commit, hundreds of milliseconds on a slow disk, and a
// player's reads queued behind it would freeze. So the read asks not to wait (RWF_NOWAIT), and when it would have
// to, reads through the page cache, which takes no such lock. A kernel that cannot
// tell (preadv2 missing before Linux 4.6, or no RWF_NOWAIT for this file system) would
// leave readers waiting behind writers, so direct I/O stops there altogether.
func (c *Cache) readData(h *fileHandles, p []byte, off int64, direct bool) error {
	if direct && c.direct(h, p, off) {
		err := c.readDirect(h.directFd, p, off)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EAGAIN):
			c.directBusy.Add(1)
		case errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EOPNOTSUPP):
			if !c.noDirect.Swap(true) {
				c.log.Info("cache: reads cannot skip waiting for cache writes here (preadv2 RWF_NOWAIT); block data goes through the page cache from now on", "err", err)
			}
		case !c.directFailed(err):
			return err
		}
	}
	return preadFull(h.dataFd, p, off)
}

// preadNoWait fills p from fd at off with preadv2(RWF_NOWAIT): EAGAIN where the read
// would block on a lock, EOPNOTSUPP where the kernel cannot say so. A short read is
// finished the same way; one that returns nothing is io.ErrUnexpectedEOF.
func preadNoWait(fd int, p []byte, off int64) error {
	for len(p) > 0 {
		iov := unix.Iovec{Base: &p[0]}
		iov.SetLen(len(p))
		n, _, e := unix.Syscall6(unix.SYS_PREADV2, uintptr(fd), uintptr(unsafe.Pointer(&iov)), 1,
			uintptr(off), uintptr(off>>32), unix.RWF_NOWAIT)
		switch {
		case e == syscall.EINTR:
			continue
		case e != 0:
			return e
		case n == 0:
			return io.ErrUnexpectedEOF
		}
		p = p[n:]
		off += int64(n)
	}
	return nil
}
