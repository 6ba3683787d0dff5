package metrics_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/playhead/playhead/metrics"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

// sample returns the metric of family name whose labels include want, or nil.
func sample(t *testing.T, m *metrics.Metrics, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, s := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range s.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			return s
		}
	}
	return nil
}

// value returns the counter or gauge value of name with labels want.
func value(t *testing.T, m *metrics.Metrics, name string, want map[string]string) float64 {
	t.Helper()
	s := sample(t, m, name, want)
	if s == nil {
		t.Fatalf("no sample %s%v", name, want)
	}
	if c := s.GetCounter(); c != nil {
		return c.GetValue()
	}
	return s.GetGauge().GetValue()
}

// newEngine returns the engine over mem, without read-ahead, reporting to m; closed
// when the test ends.
func newEngine(t *testing.T, mem *memsrc.Source, m *metrics.Metrics) *vfs.FS {
	t.Helper()
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	opts.ReadAhead.MaxWindow = 0
	opts.Fetch.IOTimeout = 5 * time.Second // a broken test fails, never hangs
	opts.Fetch.Observer = m
	fsys, err := vfs.New(mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	m.Watch(fsys)
	return fsys
}

// Reads through the engine show in the event series, labelled by source and tier, and
// agree with the polled counters that count the same things.
func TestEngineEventsAgreeWithCounters(t *testing.T) {
	const size, chunk = 2 << 20, 400 << 10 // 8 default blocks, reads that straddle them
	mem := memsrc.New()
	mem.AddPattern("a.bin", 5, size)
	m := metrics.New("mem")
	fsys := newEngine(t, mem, m)
	reads := 0
	for pass := 0; pass < 2; pass++ {
		f, err := fsys.Open(context.Background(), "a.bin")
		if err != nil {
			t.Fatal(err)
		}
		for off := int64(0); off < size; off += chunk {
			if _, err := f.ReadAt(make([]byte, chunk), off); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			reads++
		}
		f.Close()
	}
	src := map[string]string{"source": "mem"}
	if s := sample(t, m, "playhead_read_seconds", src); s.GetHistogram().GetSampleCount() != uint64(reads) {
		t.Errorf("playhead_read_seconds count = %d, want %d reads", s.GetHistogram().GetSampleCount(), reads)
	}
	if v := value(t, m, "playhead_read_bytes_total", src); v != 2*size {
		t.Errorf("playhead_read_bytes_total = %v, want %d", v, 2*size)
	}
	cached := value(t, m, "playhead_blocks_read_total", map[string]string{"source": "mem", "tier": "cache"})
	fetched := value(t, m, "playhead_blocks_read_total", map[string]string{"source": "mem", "tier": "fetch"})
	if cached != value(t, m, "playhead_blocks_from_cache_total", nil) || fetched != value(t, m, "playhead_blocks_from_fetch_total", nil) {
		t.Errorf("blocks by tier cache %v fetch %v disagree with the counters", cached, fetched)
	}
	if fetched == 0 || cached == 0 {
		t.Errorf("blocks by tier cache %v fetch %v: want both over a cold and a warm pass", cached, fetched)
	}
	answers := sample(t, m, "playhead_origin_answer_seconds", src).GetHistogram().GetSampleCount()
	if requests := value(t, m, "playhead_origin_requests_total", nil); float64(answers) != requests || requests == 0 {
		t.Errorf("playhead_origin_answer_seconds count = %d, playhead_origin_requests_total = %v", answers, requests)
	}
}

// The handler serves every series under its name, the old unlabelled ones included, and
// the tier series exist at 0 before any block is read.
func TestHandlerServesEverySeries(t *testing.T) {
	m := metrics.New("http")
	newEngine(t, memsrc.New(), m)
	m.Read(3*time.Millisecond, 4096)
	m.OriginAnswered(200 * time.Millisecond)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`playhead_origin_requests_total 0`, `playhead_origin_bytes_total 0`, `playhead_origin_retries_total 0`,
		`playhead_read_failures_total 0`, `playhead_blocks_from_cache_total 0`, `playhead_blocks_from_fetch_total 0`,
		`playhead_cache_write_errors_total 0`, `playhead_cache_corrupt_blocks_total 0`, `playhead_cache_evictions_total 0`,
		`playhead_cache_direct_writes_total 0`, `playhead_cache_bytes 0`, `playhead_cache_scan_removed 0`,
		`playhead_blocks_read_total{source="http",tier="cache"} 0`, `playhead_blocks_read_total{source="http",tier="fetch"} 0`,
		`playhead_read_seconds_bucket{source="http",le="0.005"} 1`, `playhead_read_seconds_bucket{source="http",le="0.0025"} 0`,
		`playhead_read_bytes_total{source="http"} 4096`,
		`playhead_origin_answer_seconds_bucket{source="http",le="0.2"} 1`, `playhead_origin_answer_seconds_count{source="http"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}
