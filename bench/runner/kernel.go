package runner

import (
	"fmt"
	"strings"
	"sync"

	"github.com/playhead/playhead/bench/scenario"
	"github.com/playhead/playhead/linkemu"
	"github.com/playhead/playhead/linkemu/kernlink"
)

// A kernel-shaped link (kernlink: a network namespace behind two TUN devices, the
// round trip added per packet by this process, the bandwidth enforced by tbf) carries
// the bytes between the mount and a relay listening inside the namespace: a linkemu
// proxy with no delay and no shared limit, which dials the origin on loopback. So the
// TCP connection the mount reads from is the one the link shapes, end to end over the
// real round trip, whatever the origin; the origin's own counters, the relay's
// connection counts (nginx, MinIO) and presigned URLs (MinIO) work as on the user-space
// links. The relay paces each connection when the profile caps it (cloud-kernel): an
// object store's front end throttling a GET, which tbf cannot do per flow and this
// kernel has no fq qdisc for.
//
// The origin's own TCP (to the relay) is on loopback and does not see the round trip;
// only the relay's does. The relay holds what an origin's socket would (linkemu's Relay:
// a 1 MiB window, small buffers towards the origin, the link's socket autotuned as the
// origin's would be), so the origin's body count stays near what crossed the link when
// a stream is cancelled; FigOriginWireBytes is what did cross it.

// linkSetup is the link between the mount and the origin, however it is built.
type linkSetup struct {
	link   *linkemu.Link  // the user-space link, or the relay in the namespace
	kernel *kernlink.Link // the kernel-shaped link, or nil
	url    string         // what the mount and the probe dial
	desc   string         // for the header
	close  func() error   // tears everything down
}

// LinkNames lists every link profile: linkemu's, then the kernel-shaped ones.
func LinkNames() []string {
	return append(linkemu.ProfileNames(), kernlink.ProfileNames()...)
}

// CheckLink refuses a name that is no link profile.
func CheckLink(name string) error {
	if _, ok := kernlink.Profile(name); ok {
		return nil
	}
	if _, err := linkemu.Profile(name); err != nil {
		return fmt.Errorf("bench: unknown link %q (have %s)", name, strings.Join(LinkNames(), ", "))
	}
	return nil
}

// startLink starts the link cfg.Link names in front of target (host:port).
func startLink(name, target string) (*linkSetup, error) {
	if kopts, ok := kernlink.Profile(name); ok {
		return startKernelLink(name, kopts, target)
	}
	opts, err := linkemu.Profile(name)
	if err != nil {
		return nil, err
	}
	link, err := linkemu.New(target, opts)
	if err != nil {
		return nil, err
	}
	addr, err := link.Start("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &linkSetup{link: link, url: "http://" + addr + "/", desc: opts.String(), close: link.Close}, nil
}

// directLink is the loopback link to the built-in origin: the mount dials the origin
// itself. The "loopback" profile's proxy emulates nothing and costs a copy of every byte
// in the bench's process, CPU a user's loopback copy does not spend; the built-in origin
// counts its own connections, which other origins need the proxy for (nginx, MinIO).
func directLink(target string) *linkSetup {
	return &linkSetup{url: "http://" + target + "/", desc: "no emulation: the mount dials the origin directly",
		close: func() error { return nil }}
}

func startKernelLink(name string, kopts kernlink.Options, target string) (*linkSetup, error) {
	kl, err := kernlink.Start(kopts)
	if err != nil {
		return nil, fmt.Errorf("bench: --link %s needs root and tc tbf: %w", name, err)
	}
	relay, err := linkemu.New(target, linkemu.Options{PerConnBandwidth: kopts.PerConnBandwidth, Relay: true})
	if err != nil {
		kl.Close()
		return nil, err
	}
	ln, err := kl.Listen(0)
	if err != nil {
		kl.Close()
		return nil, fmt.Errorf("bench: --link %s: %w", name, err)
	}
	addr, err := relay.Serve(ln)
	if err != nil {
		kl.Close()
		return nil, err
	}
	return &linkSetup{
		link: relay, kernel: kl, url: "http://" + addr + "/",
		desc: kopts.String() + ", origin behind a relay in the namespace " + kl.Namespace(),
		close: func() error {
			err := relay.Close()
			if kerr := kl.Close(); err == nil {
				err = kerr
			}
			return err
		},
	}, nil
}

// wireCounted adds to an origin's figures what the namespace's end of a kernel-shaped
// link sent in the trial (FigOriginWireBytes): the kernel's count of the bytes that
// left for the mount, IP and TCP headers and retransmissions included.
type wireCounted struct {
	originServer
	kl *kernlink.Link

	mu      sync.Mutex // guards the mark
	mark    int64
	markErr error
}

var _ figuresOrigin = (*wireCounted)(nil)

// ResetStats implements originServer.
func (w *wireCounted) ResetStats() {
	w.originServer.ResetStats()
	tx, err := w.kl.ServerTxBytes()
	w.mu.Lock()
	w.mark, w.markErr = tx, err
	w.mu.Unlock()
}

// trialFigures implements figuresOrigin: the origin's own extra figures, if any, and the
// bytes on the wire.
func (w *wireCounted) trialFigures() (scenario.Figures, error) {
	figs := scenario.Figures{}
	if fo, ok := w.originServer.(figuresOrigin); ok {
		var err error
		if figs, err = fo.trialFigures(); err != nil {
			return nil, err
		}
	}
	tx, err := w.kl.ServerTxBytes()
	w.mu.Lock()
	mark, markErr := w.mark, w.markErr
	w.mu.Unlock()
	if err == nil {
		err = markErr
	}
	if err != nil {
		return nil, fmt.Errorf("bench: read the namespace's transmitted bytes: %w", err)
	}
	figs[scenario.FigOriginWireBytes] = float64(tx - mark)
	return figs, nil
}
