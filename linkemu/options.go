package linkemu

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Options describe the emulated link. The zero value is a plain proxy: no delay, no cap,
// no handshake charge (that is the "loopback" profile).
type Options struct {
	// RTT is the round-trip time. Each direction delays every byte by RTT/2: data the
	// sender writes at t reaches the receiver at t + RTT/2 + its serialization time.
	// Zero means no delay. Default (DefaultOptions) 200 ms, the "far" link.
	RTT time.Duration

	// Bandwidth is the link's capacity in bytes per second (decimal: 30 MB/s is
	// 30_000_000), per direction, SHARED by every connection through the link: two
	// concurrent downloads each get about half. Zero means unlimited. Default 30 MB/s.
	Bandwidth int64

	// PerConnBandwidth caps each connection, per direction, in bytes per second, on top
	// of Bandwidth: object stores throttle every GET this way (tens of MB/s), so clients
	// open several ranged GETs at once. Zero means no per-connection cap. Default 0.
	PerConnBandwidth int64

	// HandshakeRTTs is how many extra round trips a new connection costs before its
	// first byte flows (TCP's SYN/SYN-ACK is one; TLS would add one or two). Reusing a
	// keep-alive connection avoids the charge, which is one of the things benchmarks
	// measure. Zero means connections are free. Default 1.
	HandshakeRTTs int

	// Relay marks a proxy that stands in front of a real link (the bench's kernel-shaped
	// ones) without emulating one: it holds what an origin's own socket would, no more.
	// Its window is minWindow and the target's socket buffers socketBuffer, so the target
	// writes about what the link takes. Left to a plain proxy's 16 MiB window and
	// autotuned loopback buffers, a range the client dropped counted at the target tens of
	// megabytes that never crossed the link (BENCHMARKS, session 26). Default false.
	Relay bool
}

// DefaultOptions returns the "far" link: 200 ms, 30 MB/s shared, one handshake RTT.
func DefaultOptions() Options {
	o, _ := Profile(ProfileFar)
	return o
}

// Validate reports options that cannot describe a link.
func (o Options) Validate() error {
	var errs []error
	if o.RTT < 0 {
		errs = append(errs, fmt.Errorf("linkemu: RTT %v is negative", o.RTT))
	}
	if o.Bandwidth < 0 {
		errs = append(errs, fmt.Errorf("linkemu: Bandwidth %d B/s is negative", o.Bandwidth))
	}
	if o.PerConnBandwidth < 0 {
		errs = append(errs, fmt.Errorf("linkemu: PerConnBandwidth %d B/s is negative", o.PerConnBandwidth))
	}
	if o.HandshakeRTTs < 0 {
		errs = append(errs, fmt.Errorf("linkemu: HandshakeRTTs %d is negative", o.HandshakeRTTs))
	}
	return errors.Join(errs...)
}

// Emulates reports whether the options change anything compared to a plain proxy.
func (o Options) Emulates() bool {
	return o.RTT > 0 || o.Bandwidth > 0 || o.PerConnBandwidth > 0
}

// carriesLink reports whether the proxy itself delays or shares the link. Only then does
// it shrink its client socket's buffers: when only PerConnBandwidth is set, the proxy is
// a relay whose client socket is the sender on a real (kernel-shaped) link, and its
// window must grow with that link's round trip.
func (o Options) carriesLink() bool {
	return o.RTT > 0 || o.Bandwidth > 0
}

// String describes the link in one line, for benchmark headers.
func (o Options) String() string {
	if !o.Emulates() {
		return "no emulation"
	}
	s := fmt.Sprintf("rtt %v", o.RTT)
	if o.Bandwidth > 0 {
		s += fmt.Sprintf(", %.1f MB/s shared", float64(o.Bandwidth)/1e6)
	}
	if o.PerConnBandwidth > 0 {
		s += fmt.Sprintf(", %.1f MB/s per connection", float64(o.PerConnBandwidth)/1e6)
	}
	if o.HandshakeRTTs > 0 {
		s += fmt.Sprintf(", %d RTT per new connection", o.HandshakeRTTs)
	}
	return s
}

// Profile names.
const (
	// ProfileFar is a long-distance link: every stream shares one slow pipe, so splitting
	// a download over connections gains nothing and latency hiding is all that helps.
	ProfileFar = "far"
	// ProfileCloud is an object store in the same region: each GET is throttled, the
	// pipe itself is wide, so parallel ranged GETs multiply throughput.
	ProfileCloud = "cloud"
	// ProfileLAN is a local network: round trips are nearly free, bandwidth is high.
	ProfileLAN = "lan"
	// ProfileLoopback is no emulation at all. Start still proxies (so Stats and connection
	// counts work the same for every profile), adding only the proxy's own copy.
	ProfileLoopback = "loopback"
)

var profiles = map[string]Options{
	ProfileFar:      {RTT: 200 * time.Millisecond, Bandwidth: 30_000_000, HandshakeRTTs: 1},
	ProfileCloud:    {RTT: 40 * time.Millisecond, Bandwidth: 1_000_000_000, PerConnBandwidth: 25_000_000, HandshakeRTTs: 1},
	ProfileLAN:      {RTT: 500 * time.Microsecond, Bandwidth: 1_000_000_000, HandshakeRTTs: 1},
	ProfileLoopback: {},
}

// Profile returns the options of a named link: "far", "cloud", "lan" or "loopback".
func Profile(name string) (Options, error) {
	o, ok := profiles[strings.ToLower(name)]
	if !ok {
		return Options{}, fmt.Errorf("linkemu: unknown profile %q (have %s)", name, strings.Join(ProfileNames(), ", "))
	}
	return o, nil
}

// ProfileNames lists the known profiles, sorted.
func ProfileNames() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
