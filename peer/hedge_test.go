package peer

import (
	"testing"
	"time"
)

// A peer is given the ceiling until the origin's answer time is known, however fast
// the peer usually is: the hedge would send the run to an origin that may be slower
// than the peer. Once a listing or a range has measured the origin, the threshold is
// the peer's usual time times HedgeMult plus the origin's, within the floor.
func TestThresholdWaitsForTheOriginsMeasure(t *testing.T) {
	o := DefaultOptions()
	h := newHedger(o)
	const peer = "10.0.0.2:7947"
	h.peerAnswered(peer, 2*time.Millisecond)
	if got := h.threshold(peer); got != o.HedgeCeiling {
		t.Errorf("threshold with the origin unmeasured = %v, want the ceiling %v", got, o.HedgeCeiling)
	}
	h.metaAnswered(200 * time.Millisecond) // a far origin's listing
	if got, want := h.threshold(peer), 8*time.Millisecond+200*time.Millisecond; got != want {
		t.Errorf("threshold after a 200 ms listing = %v, want %v (4 × 2 ms + 200 ms)", got, want)
	}
	h.metaAnswered(5 * time.Second) // only the first metadata answer counts
	h.originAnswered(200 * time.Millisecond)
	if got, want := h.threshold(peer), 8*time.Millisecond+200*time.Millisecond; got != want {
		t.Errorf("threshold after a later listing and a range = %v, want %v", got, want)
	}
}
