package cache

import (
	"hash/crc32"
	"io"
	"syscall"
)

// Raw file access for Get: syscall.Open/Pread/Close on an int fd cost no *os.File
// allocation and no attempt to register a regular file with the netpoller.

func openRead(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// preadFull fills p from fd at off; a file that ends first is io.ErrUnexpectedEOF.
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

func crc32Sum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }
