package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/peer"
)

// The tiers the bytes of a mount come from, the values of the tier label.
const (
	tierCache  = "cache"
	tierPeer   = "peer"
	tierOrigin = "origin"
)

// PeerTier is what a scrape polls of a node's peer tier (issue 16). The command's
// running tier implements it over peer.Source, its membership and its server.
// Methods are called at every scrape, concurrently with reads: they must be safe for
// concurrent use and return at once.
type PeerTier interface {
	// ClientStats are the node's reads through the tier: peer.Source.Stats.
	ClientStats() peer.Stats
	// ServerStats are what the node's peer server answered the others.
	ServerStats() ServerStats
	// LiveMembers is how many members the ring is built from now, this node included.
	LiveMembers() int
}

// ServerStats are the counters of a node's peer server (peerserve.Handler.Stats),
// carried in a type of this package so that metrics stays below the server's layer.
type ServerStats struct {
	Served, ServedBytes int64 // ranges served to peers (200) and their bytes
	Unauthenticated     int64 // requests refused for a missing, bad, stale or replayed signature
}

// WatchPeer registers the peer tier's series, read at each scrape, and makes the tier
// series count peer and origin bytes from p. Call it at most once per Metrics, before or
// after Watch.
func (m *Metrics) WatchPeer(p PeerTier) {
	m.peerMu.Lock()
	m.peer = p
	m.peerMu.Unlock()
	m.reg.MustRegister(newPeerCollector(p))
}

// peerTier returns the tier WatchPeer gave, or nil.
func (m *Metrics) peerTier() PeerTier {
	m.peerMu.Lock()
	defer m.peerMu.Unlock()
	return m.peer
}

// peerState guards the tier WatchPeer gave; embedded in Metrics.
type peerState struct {
	peerMu sync.Mutex
	peer   PeerTier // nil without the peer tier; guarded by peerMu
}

// tierCollector exposes where the bytes readers got came from, on every mount: the
// cache from the engine's counters, the peer and the origin from the peer tier's when
// the mount has one (the engine then sees both as one source), else the origin from
// the engine's. Every tier's series exists from the first scrape, at 0 if need be.
type tierCollector struct {
	m             *Metrics
	stats         Stats
	bytes, reqsts *prometheus.Desc
}

func newTierCollector(m *Metrics, s Stats) *tierCollector {
	return &tierCollector{m: m, stats: s,
		bytes: prometheus.NewDesc("playhead_tier_bytes_total",
			"Bytes by tier: cache, of the blocks readers got from the block cache; peer and origin, fetched from them (read-ahead included).",
			[]string{"tier"}, nil),
		reqsts: prometheus.NewDesc("playhead_tier_requests_total",
			"Requests by tier: cache, blocks read from the block cache; peer and origin, ranges opened at them.",
			[]string{"tier"}, nil),
	}
}

func (c *tierCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.bytes; ch <- c.reqsts }

func (c *tierCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.stats.FetchStats()
	emit := func(tier string, reqs, bytes int64) {
		ch <- prometheus.MustNewConstMetric(c.reqsts, prometheus.CounterValue, float64(reqs), tier)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(bytes), tier)
	}
	emit(tierCache, f.BlocksCached, f.BytesCached)
	if p := c.m.peerTier(); p != nil {
		s := p.ClientStats()
		emit(tierPeer, s.PeerRuns, s.PeerBytes)
		emit(tierOrigin, s.OriginRuns, s.OriginBytes)
		return
	}
	emit(tierPeer, 0, 0)
	emit(tierOrigin, f.Requests, f.BytesFetched)
}

// The reasons a peer run went to the origin, the values of the reason label.
const (
	bypassHedge   = "hedge"   // the peer passed the hedge threshold
	bypassVersion = "version" // the peer holds another version (409)
	bypassRefused = "refused" // the peer refused the request (401, 403, 404, 421)
	bypassDown    = "down"    // the peer was marked down by an earlier failure: not asked
	bypassError   = "error"   // any other failure: unreachable, 5xx, cut short
)

// peerCollector exposes the peer tier's own series.
type peerCollector struct {
	p                                    PeerTier
	bypassed, members                    *prometheus.Desc
	served, servedBytes, unauthenticated *prometheus.Desc
}

func newPeerCollector(p PeerTier) *peerCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("playhead_peer_"+name, help, labels, nil)
	}
	return &peerCollector{p: p,
		bypassed:    desc("bypassed_total", "Peer runs read from the origin instead, by reason: hedge, version, refused, down (not asked: marked down by an earlier failure) or error.", "reason"),
		members:     desc("members", "Live members of the peer tier, this node included."),
		served:      desc("served_requests_total", "Ranges this node served to peers."),
		servedBytes: desc("served_bytes_total", "Bytes this node served to peers."),
		unauthenticated: desc("unauthenticated_total",
			"Peer requests refused with 401: a missing, bad, stale or replayed signature."),
	}
}

func (c *peerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.bypassed, c.members, c.served, c.servedBytes, c.unauthenticated} {
		ch <- d
	}
}

func (c *peerCollector) Collect(ch chan<- prometheus.Metric) {
	s, srv := c.p.ClientStats(), c.p.ServerStats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(c.bypassed, s.Hedged, bypassHedge)
	counter(c.bypassed, s.NotThisVersion, bypassVersion)
	counter(c.bypassed, s.Refused, bypassRefused)
	counter(c.bypassed, s.SkippedDown, bypassDown)
	counter(c.bypassed, s.PeerErrors, bypassError)
	counter(c.served, srv.Served)
	counter(c.servedBytes, srv.ServedBytes)
	counter(c.unauthenticated, srv.Unauthenticated)
	ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(c.p.LiveMembers()))
}
