package cache

import (
	"errors"
	"hash/crc32"
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// Raw file access on the long-lived descriptors of the fd cache: positioned reads, hole
// punching to give an evicted block's space back, and finding the data between holes.
// Seeking moves the shared file offset, which nothing else uses (all I/O is positioned).

// preadFull fills p from fd at off; a file that ends first is io.ErrUnexpectedEOF. It
// takes the raw descriptor (see fileHandles) because (*os.File).ReadAt makes a buffer
// on Get's stack escape to the heap.
func preadFull(fd int, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := syscall.Pread(fd, p, off)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		p = p[n:]
		off += int64(n)
	}
	return nil
}

// punchHole deallocates [off, off+n) of f, keeping its size: reads there return zeros.
// Most Linux file systems support it (ext4, xfs, btrfs, tmpfs); where one does not,
// the space of an evicted block comes back only when its whole directory goes.
func punchHole(fd int, off, n int64) error {
	for {
		err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
		if err != unix.EINTR {
			return err
		}
	}
}

// nextData returns the offset of the first byte at or after off that is not in a hole,
// or ok false if there is none. A file system without SEEK_DATA reports off itself.
func nextData(fd int, off int64) (int64, bool, error) {
	d, err := unix.Seek(fd, off, unix.SEEK_DATA)
	switch {
	case err == nil:
		return d, true, nil
	case errors.Is(err, unix.ENXIO):
		return 0, false, nil
	case errors.Is(err, unix.EINVAL):
		return off, true, nil
	}
	return 0, false, err
}

// nextHole returns the offset of the first hole at or after off (the end of the file
// counts as one).
func nextHole(fd int, off int64) (int64, error) {
	h, err := unix.Seek(fd, off, unix.SEEK_HOLE)
	if errors.Is(err, unix.EINVAL) { // no SEEK_HOLE: all data up to the end
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return 0, err
		}
		return st.Size, nil
	}
	return h, err
}

// zeroRecord is a blank index record, written over one to retire its block.
var zeroRecord [recLen]byte

func crc32Sum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }
