// Package metrics owns playhead's Prometheus series: the registry, the collectors, their
// names, labels and buckets. The engine does not know Prometheus: it reports events as
// they happen through fetch.Observer (implemented here by *Metrics) and keeps cumulative
// counters that a scrape reads (stats.go). A new series is added here alone.
//
// Series and labels:
//   - playhead_read_seconds, playhead_read_bytes_total: reads as the engine answered
//     them (FUSE reads, library reads), labelled by source.
//   - playhead_blocks_read_total{tier}: blocks readers got, by fetch.Tier.
//   - playhead_origin_answer_seconds: how long the origin took to answer a range.
//   - the polled counters of stats.go, without labels, under the names they have always
//     had (dashboards and alerts use them).
//   - playhead_tier_bytes_total{tier}, playhead_tier_requests_total{tier} (tier.go):
//     where the bytes came from, tier "cache", "peer" or "origin", on every mount (peer
//     at 0 without the peer tier).
//   - with the peer tier (WatchPeer): playhead_peer_bypassed_total{reason} (reason
//     "hedge", "version", "refused" or "error"), playhead_peer_members, and the server's
//     playhead_peer_served_requests_total, playhead_peer_served_bytes_total and
//     playhead_peer_unauthenticated_total.
//
// Polled series are read from the engine and the peer tier at each scrape, so each
// exists, at 0 if need be, from the first scrape: a rate over a series that appeared
// with its first event would miss that event.
//
// The source label is the source's scheme ("http", "file"), not its URL: one value per
// mount, and a URL may carry credentials that must not reach a metrics endpoint.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/playhead/playhead/fetch"
)

// latencyBuckets, in seconds, span what a read or an origin answer takes: 0.5 ms (a
// block in the page cache) through 10 ms (the bench's freeze threshold), 200 ms (the far
// link's round trip) to 30 s (the default I/O timeout, after which a read fails). Fewer
// buckets would merge a cached read with a round trip; more cost each series memory.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .2, .5, 1, 2.5, 5, 10, 30}

// Metrics is the registry of one mount and the fetch.Observer its engine reports to.
// Safe for concurrent use.
type Metrics struct {
	reg       *prometheus.Registry
	read      prometheus.Observer
	readBytes prometheus.Counter
	blocks    *prometheus.CounterVec
	answer    prometheus.Observer
	peerState // the peer tier, when WatchPeer gave one (tier.go)
}

var _ fetch.Observer = (*Metrics)(nil)

// New returns the metrics of a mount of a source of the named scheme (the source
// label), with the event series registered; Watch adds the engine's counters.
func New(source string) *Metrics {
	labels := prometheus.Labels{"source": source}
	read := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "playhead_read_seconds", Help: "Time the engine took to answer a read, failed ones included.",
		Buckets: latencyBuckets, ConstLabels: labels})
	readBytes := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "playhead_read_bytes_total", Help: "Bytes the engine returned to reads.", ConstLabels: labels})
	blocks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "playhead_blocks_read_total", Help: "Blocks readers got, by tier: cache (the block cache) or fetch (a fetch in flight).",
		ConstLabels: labels}, []string{"tier"})
	answer := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "playhead_origin_answer_seconds", Help: "Time the origin took to answer a range request (its response headers).",
		Buckets: latencyBuckets, ConstLabels: labels})
	m := &Metrics{reg: prometheus.NewRegistry(), read: read, readBytes: readBytes, blocks: blocks, answer: answer}
	m.reg.MustRegister(read, readBytes, blocks, answer)
	// Series of the known tiers exist from the start, at 0: a rate over a series that
	// appears with its first block would miss that block.
	for _, t := range []fetch.Tier{fetch.TierCache, fetch.TierFetch} {
		blocks.WithLabelValues(string(t))
	}
	return m
}

// Read implements fetch.Observer.
func (m *Metrics) Read(d time.Duration, n int) {
	m.read.Observe(d.Seconds())
	m.readBytes.Add(float64(n))
}

// BlockRead implements fetch.Observer.
func (m *Metrics) BlockRead(tier fetch.Tier) { m.blocks.WithLabelValues(string(tier)).Inc() }

// OriginAnswered implements fetch.Observer.
func (m *Metrics) OriginAnswered(d time.Duration) { m.answer.Observe(d.Seconds()) }

// Registry returns the registry every series is in, for a handler or a test's Gather.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }
