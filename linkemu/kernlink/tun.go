package kernlink

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openTun creates the TUN device name in this process's network namespace and returns
// its file: each Read is one IP packet the kernel sent out of the device, each Write one
// packet the kernel receives on it. The device lives as long as the file is open. The
// file is non-blocking, so Go's poller serves it and Close ends a blocked Read.
func openTun(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tun %s: %w", name, err)
	}
	// IFF_NO_PI: packets without the 4-byte protocol header, so a packet read from one
	// device is written to the other as it is.
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("create tun %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "tun "+name), nil
}
