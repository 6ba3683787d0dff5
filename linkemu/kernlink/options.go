package kernlink

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Options describe a kernel-shaped link.
type Options struct {
	// RTT is the round trip the delay lines add: RTT/2 each way, per packet. Zero means
	// none (the namespace's own latency, tens of microseconds).
	RTT time.Duration
	// Bandwidth is tbf's rate on each direction's sending device, in bytes per second
	// (decimal), shared by every connection. Must be positive.
	Bandwidth int64
	// PerConnBandwidth caps each connection in bytes per second. kernlink does not
	// enforce it: it is for the relay the caller puts in the namespace (the bench uses
	// linkemu's PerConnBandwidth). Zero means no per-connection cap.
	PerConnBandwidth int64
	// MTU of both TUN devices, in bytes. Zero means 1500, an Internet path's.
	MTU int
}

// Profile names.
const (
	// ProfileFarShared is the far link with the kernel sharing the pipe: 200 ms, 30 MB/s
	// for every connection together.
	ProfileFarShared = "far-shared"
	// ProfileCloudKernel is an object store in the region: 40 ms, each connection capped
	// at 25 MB/s, a wide pipe shared by all.
	ProfileCloudKernel = "cloud-kernel"
)

// cloudPipe is cloud-kernel's shared pipe, 250 MB/s: ten capped connections fit in it.
// The delay lines carry at most a few hundred MB/s on two cores at this MTU, so a wider
// tbf would only measure this process.
const cloudPipe = 250_000_000

// cloudMTU is cloud-kernel's MTU: 9001, the jumbo frames of a cloud provider's network
// inside a region, which also divides the packets the delay lines carry by six.
const cloudMTU = 9001

var profiles = map[string]Options{
	ProfileFarShared:   {RTT: 200 * time.Millisecond, Bandwidth: 30_000_000, MTU: 1500},
	ProfileCloudKernel: {RTT: 40 * time.Millisecond, Bandwidth: cloudPipe, PerConnBandwidth: 25_000_000, MTU: cloudMTU},
}

// Profile returns the options of a named kernel-shaped link, and false for a name that
// is not one.
func Profile(name string) (Options, bool) {
	o, ok := profiles[strings.ToLower(name)]
	return o, ok
}

// ProfileNames lists the kernel-shaped profiles, sorted.
func ProfileNames() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Limits of Options.MTU: IPv4's minimum datagram, and a TUN's maximum.
const (
	minMTU = 576
	maxMTU = 65535
)

// Validate reports options that cannot describe a link.
func (o Options) Validate() error {
	var errs []error
	if o.RTT < 0 {
		errs = append(errs, fmt.Errorf("kernlink: RTT %v is negative", o.RTT))
	}
	if o.Bandwidth <= 0 {
		errs = append(errs, fmt.Errorf("kernlink: Bandwidth %d B/s is not positive (tbf needs a rate)", o.Bandwidth))
	}
	if o.PerConnBandwidth < 0 {
		errs = append(errs, fmt.Errorf("kernlink: PerConnBandwidth %d B/s is negative", o.PerConnBandwidth))
	}
	if o.MTU != 0 && (o.MTU < minMTU || o.MTU > maxMTU) {
		errs = append(errs, fmt.Errorf("kernlink: MTU %d is outside [%d, %d]", o.MTU, minMTU, maxMTU))
	}
	return errors.Join(errs...)
}

func (o Options) mtu() int {
	if o.MTU == 0 {
		return 1500
	}
	return o.MTU
}

// String describes the link in one line, for benchmark headers.
func (o Options) String() string {
	s := fmt.Sprintf("kernel-shaped: rtt %v (TUN delay lines), %.1f MB/s shared (tbf)", o.RTT, float64(o.Bandwidth)/1e6)
	if o.PerConnBandwidth > 0 {
		s += fmt.Sprintf(", %.1f MB/s per connection (relay in the namespace)", float64(o.PerConnBandwidth)/1e6)
	}
	return s + fmt.Sprintf(", MTU %d", o.mtu())
}
