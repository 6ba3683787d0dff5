package peer

import "sync/atomic"

// Stats counts what a Source did. Runs are the pieces a range is split into (stats of
// the origin runs include those bypassed from peers). package metrics exports them as
// playhead_tier_*{tier="peer"|"origin"} and playhead_peer_bypassed_total{reason}.
type Stats struct {
	PeerRuns, PeerBytes     int64 // runs and bytes a peer served
	OriginRuns, OriginBytes int64 // runs and bytes read from the origin (own, bypassed, fromPeer)
	Bypassed                int64 // peer runs sent to the origin instead, for any reason below
	Hedged                  int64 // ... because the peer passed the hedge threshold
	NotThisVersion          int64 // ... because the peer answered 409
	Refused                 int64 // ... because the peer answered 401, 403, 404 or 421
	PeerErrors              int64 // ... because of any other failure (unreachable, 5xx, cut short)
	SkippedDown             int64 // ... because the peer was marked down by an earlier failure (health.go)
}

// counters are the live Stats.
type counters struct {
	peerRuns, peerBytes, originRuns, originBytes     atomic.Int64
	bypassed, hedged, notThisVersion, refused, other atomic.Int64
	skippedDown                                      atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		PeerRuns: c.peerRuns.Load(), PeerBytes: c.peerBytes.Load(),
		OriginRuns: c.originRuns.Load(), OriginBytes: c.originBytes.Load(),
		Bypassed: c.bypassed.Load(), Hedged: c.hedged.Load(),
		NotThisVersion: c.notThisVersion.Load(), Refused: c.refused.Load(), PeerErrors: c.other.Load(),
		SkippedDown: c.skippedDown.Load(),
	}
}
