package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync/atomic"
	"time"

	"github.com/playhead/playhead/source"
)

// Why a peer run went to the origin; counted in Stats.
var (
	errHedged         = errors.New("peer passed the hedge threshold")
	errNotThisVersion = errors.New("peer reads another version")
	errRefused        = errors.New("peer refused the request")
	errDown           = errors.New("peer marked down after a failure")
	// errOwnerOrigin: the owner answered 502, its own origin failed the range. The
	// owner is alive; its origin's trouble is not a reason to pass over its other
	// stripes, so it is not a health failure (health.go).
	errOwnerOrigin = errors.New("the owner's origin failed the range")
)

// peerBody is a peer's answer: its bytes, the version its headers named (at least as
// specific as the one asked for: Agree held), and the cancel that ends its request.
type peerBody struct {
	io.ReadCloser
	ver    source.Version
	cancel context.CancelFunc
}

func (b *peerBody) Close() error {
	b.cancel()
	return b.ReadCloser.Close()
}

// openPeer asks m for r. It returns the answer once its status and headers are there,
// or an error: errHedged when the threshold passed first, errNotThisVersion,
// errRefused, or any other failure. The body lives until closed or ctx ends; its
// bytes are watched by body.readWatched.
func (s *Source) openPeer(ctx context.Context, m Member, r BlockRequest) (*peerBody, error) {
	ctx, cancel := context.WithCancel(ctx)
	var received atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
		if code == StatusReceived {
			received.Store(true)
			s.hedge.heardFrom(m.Addr)
		}
		return nil
	}})
	u := s.opts.Scheme + "://" + m.Addr + BlockPath + "?" + r.Query()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err == nil {
		err = s.signer.Sign(req)
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("peer request to %s: %w", m.Name, err)
	}
	var hedged atomic.Bool
	start := time.Now()
	// The owner says it received the request within the threshold, or is heard on
	// other requests meanwhile; once it has, it gets the ceiling more (watch.go).
	threshold := s.hedge.threshold(m.Addr)
	timer := s.hedge.watchPeer(m.Addr, threshold, threshold+s.opts.HedgeCeiling, &received, func() { hedged.Store(true); cancel() })
	body, v, err := s.answer(req, r)
	if err == nil {
		// The status is in: the run is the peer's from here.
		if timer.stop() {
			s.hedge.peerAnswered(m.Addr, time.Since(start))
			return &peerBody{ReadCloser: body, ver: v, cancel: cancel}, nil
		}
		body.Close()
	}
	cancel()
	if hedged.Load() {
		return nil, fmt.Errorf("%w (%v)", errHedged, s.hedge.threshold(m.Addr))
	}
	return nil, fmt.Errorf("peer %s: %w", m.Name, err)
}

// answer sends req and checks the answer: status 200, the version asked for and the
// length. The owner sends its headers before its first byte (peerserve), so an owner
// that must fetch the range from its origin first is known alive meanwhile.
func (s *Source) answer(req *http.Request, r BlockRequest) (io.ReadCloser, source.Version, error) {
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, source.Version{}, err
	}
	fail := func(err error) (io.ReadCloser, source.Version, error) {
		resp.Body.Close()
		return nil, source.Version{}, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case StatusNotThisVersion:
		return fail(errNotThisVersion)
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, StatusNotOwner:
		return fail(fmt.Errorf("%w: %s", errRefused, resp.Status))
	case http.StatusBadGateway:
		return fail(fmt.Errorf("%w: %s", errOwnerOrigin, resp.Status))
	default:
		return fail(fmt.Errorf("status %s", resp.Status))
	}
	v, err := VersionOf(resp.Header)
	if err != nil {
		return fail(err)
	}
	if !Agree(r.Version, v) {
		// The server checks this; a mismatch here is a server bug, treated as a refusal
		// so that no byte of it is served.
		return fail(fmt.Errorf("%w: answered version %v for %v", errNotThisVersion, v, r.Version))
	}
	if resp.ContentLength != r.Len {
		return fail(fmt.Errorf("answer of %d bytes for a %d-byte range", resp.ContentLength, r.Len))
	}
	return resp.Body, v, nil
}

// countBypass records why a peer run of member name went to the origin.
func (s *Source) countBypass(name string, err error) {
	s.stats.bypassed.Add(1)
	s.member(name).bypassed[bypassReason(err)].Add(1)
	switch {
	case errors.Is(err, errDown):
		s.stats.skippedDown.Add(1)
	case errors.Is(err, errHedged):
		s.stats.hedged.Add(1)
	case errors.Is(err, errNotThisVersion):
		s.stats.notThisVersion.Add(1)
	case errors.Is(err, errRefused):
		s.stats.refused.Add(1)
	default:
		s.stats.other.Add(1)
	}
}
