package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/fetch"
)

// Stats is what a scrape polls: the engine's cumulative counters. vfs.FS implements it.
type Stats interface {
	FetchStats() fetch.Stats
	CacheStats() cache.Stats
}

// Watch registers the counters of s, and the tier series over them, read at each
// scrape. Call it once per Metrics.
func (m *Metrics) Watch(s Stats) {
	m.reg.MustRegister(newStatsCollector(s), newTierCollector(m, s))
}

// statsCollector exposes the engine's counters to Prometheus, read at scrape time.
type statsCollector struct {
	stats Stats
	descs map[string]*prometheus.Desc
}

func newStatsCollector(s Stats) *statsCollector {
	c := &statsCollector{stats: s, descs: map[string]*prometheus.Desc{}}
	for name, help := range map[string]string{
		"origin_requests_total":      "Ranges opened at the origin.",
		"origin_bytes_total":         "Bytes read from the origin.",
		"origin_retries_total":       "Ranges reopened after a transient origin error.",
		"read_failures_total":        "Blocks that failed after the I/O timeout or a permanent error.",
		"blocks_from_cache_total":    "Blocks readers got from the block cache.",
		"blocks_from_fetch_total":    "Blocks readers got from a fetch in flight.",
		"cache_write_errors_total":   "Blocks that could not be written to the cache (full disk).",
		"cache_corrupt_blocks_total": "Cached blocks that failed their checksum and were dropped.",
		"cache_evictions_total":      "Blocks evicted from the cache.",
		"cache_direct_writes_total":  "Blocks written to the cache with direct I/O (from origins faster than the page cache takes new pages).",
		"cache_held_by_peer_total":   "Blocks read from the peer that owns them and not written to this node's cache (--peer-local-copy writes them).",
		"cache_bytes":                "Bytes of block data in the cache.",
		"cache_scan_removed":         "Damaged records, orphaned block data, leftover temp and stray files the cache removed when it opened.",
	} {
		c.descs[name] = prometheus.NewDesc("playhead_"+name, help, nil, nil)
	}
	return c
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	f, k := c.stats.FetchStats(), c.stats.CacheStats()
	counter := func(name string, v int64) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.CounterValue, float64(v))
	}
	counter("origin_requests_total", f.Requests)
	counter("origin_bytes_total", f.BytesFetched)
	counter("origin_retries_total", f.Retries)
	counter("read_failures_total", f.Failures)
	counter("blocks_from_cache_total", f.BlocksCached)
	counter("blocks_from_fetch_total", f.BlocksWaited)
	counter("cache_write_errors_total", f.CacheWriteErr)
	counter("cache_corrupt_blocks_total", k.Corrupt)
	counter("cache_evictions_total", k.Evictions)
	counter("cache_direct_writes_total", k.DirectWrites)
	counter("cache_held_by_peer_total", f.BlocksHeld)
	ch <- prometheus.MustNewConstMetric(c.descs["cache_bytes"], prometheus.GaugeValue, float64(k.Bytes))
	// A gauge: set once per mount by the startup scan.
	ch <- prometheus.MustNewConstMetric(c.descs["cache_scan_removed"], prometheus.GaugeValue, float64(k.ScanRemoved))
}
