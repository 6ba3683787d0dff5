package metrics_test

import (
	"context"
	"io"
	"testing"

	"github.com/playhead/playhead/metrics"
	"github.com/playhead/playhead/peer"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

// readAll reads path through fsys in one read.
func readAll(t *testing.T, fsys *vfs.FS, path string, size int64) {
	t.Helper()
	f, err := fsys.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(make([]byte, size), 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
}

// Without the peer tier, the tier series exist on the mount all the same: the cache
// counts the blocks and bytes of a file cached by an earlier engine exactly (its last
// block is short), the origin agrees with the engine's origin counters and counts
// another file's bytes, and the peer is 0.
func TestTierSeriesWithoutPeers(t *testing.T) {
	const cached, fetched = 2<<20 + 1000, 1 << 20 // 9 blocks of 256 KiB, the last of 1000 bytes; 4 blocks
	mem := memsrc.New()
	mem.AddPattern("cached.bin", 5, cached)
	mem.AddPattern("fetched.bin", 6, fetched)
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	opts.ReadAhead.MaxWindow = 0
	warm, err := vfs.New(mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, warm, "cached.bin", cached)
	warm.Close() // lands every cache write
	m := metrics.New("mem")
	opts.Fetch.Observer = m
	fsys, err := vfs.New(mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	m.Watch(fsys)
	readAll(t, fsys, "cached.bin", cached)
	readAll(t, fsys, "fetched.bin", fetched)
	tier := func(name, tier string) float64 {
		return value(t, m, "playhead_tier_"+name+"_total", map[string]string{"tier": tier})
	}
	if b, r := tier("bytes", "cache"), tier("requests", "cache"); b != cached || r != 9 {
		t.Errorf("cache tier: %v bytes in %v requests, want %d in 9", b, r, cached)
	}
	if b, r := tier("bytes", "origin"), tier("requests", "origin"); b != value(t, m, "playhead_origin_bytes_total", nil) ||
		r != value(t, m, "playhead_origin_requests_total", nil) || b != fetched {
		t.Errorf("origin tier: %v bytes in %v requests, want the engine's origin counters and %d bytes", b, r, fetched)
	}
	if b, r := tier("bytes", "peer"), tier("requests", "peer"); b != 0 || r != 0 {
		t.Errorf("peer tier without peers: %v bytes in %v requests", b, r)
	}
	if s := sample(t, m, "playhead_peer_members", nil); s != nil {
		t.Errorf("a mount without the peer tier shows playhead_peer_members")
	}
}

// fakeTier is a peer tier whose counters the test sets.
type fakeTier struct {
	client  peer.Stats
	server  metrics.ServerStats
	members int
}

func (f *fakeTier) ClientStats() peer.Stats          { return f.client }
func (f *fakeTier) ServerStats() metrics.ServerStats { return f.server }
func (f *fakeTier) LiveMembers() int                 { return f.members }

// With the peer tier, the peer and origin tiers come from the tier's counters, every
// peer series exists at 0 before anything happened, and each shows the counter it
// names afterwards.
func TestPeerSeries(t *testing.T) {
	m := metrics.New("http")
	ft := &fakeTier{members: 3}
	m.WatchPeer(ft)
	newEngine(t, memsrc.New(), m)
	bypassed := func(reason string) float64 {
		return value(t, m, "playhead_peer_bypassed_total", map[string]string{"reason": reason})
	}
	for _, r := range []string{"hedge", "version", "refused", "down", "error"} {
		if v := bypassed(r); v != 0 {
			t.Errorf("bypassed{reason=%q} = %v before anything happened", r, v)
		}
	}
	for _, name := range []string{"served_requests_total", "served_bytes_total", "unauthenticated_total"} {
		if v := value(t, m, "playhead_peer_"+name, nil); v != 0 {
			t.Errorf("playhead_peer_%s = %v before anything happened", name, v)
		}
	}
	ft.client = peer.Stats{PeerRuns: 7, PeerBytes: 7000, OriginRuns: 2, OriginBytes: 2000,
		Bypassed: 18, Hedged: 1, NotThisVersion: 2, Refused: 3, PeerErrors: 4, SkippedDown: 8}
	ft.server = metrics.ServerStats{Served: 5, ServedBytes: 5000, Unauthenticated: 6}
	ft.members = 2
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"playhead_tier_requests_total", map[string]string{"tier": "peer"}, 7},
		{"playhead_tier_bytes_total", map[string]string{"tier": "peer"}, 7000},
		{"playhead_tier_requests_total", map[string]string{"tier": "origin"}, 2},
		{"playhead_tier_bytes_total", map[string]string{"tier": "origin"}, 2000},
		{"playhead_peer_bypassed_total", map[string]string{"reason": "hedge"}, 1},
		{"playhead_peer_bypassed_total", map[string]string{"reason": "version"}, 2},
		{"playhead_peer_bypassed_total", map[string]string{"reason": "refused"}, 3},
		{"playhead_peer_bypassed_total", map[string]string{"reason": "error"}, 4},
		{"playhead_peer_bypassed_total", map[string]string{"reason": "down"}, 8},
		{"playhead_peer_served_requests_total", nil, 5},
		{"playhead_peer_served_bytes_total", nil, 5000},
		{"playhead_peer_unauthenticated_total", nil, 6},
		{"playhead_peer_members", nil, 2},
	} {
		if v := value(t, m, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
}
