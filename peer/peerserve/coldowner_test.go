package peerserve_test

import (
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/peer"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// The origin of the cold-owner test: a far one, 50 ms to its first byte, and 4 MiB/s
// to each node, so that an owner's first byte of a stripe it must fetch comes a round
// trip and a block's transfer (62 ms) after the request, past the default hedge
// threshold of a peer whose warm answers take a few milliseconds. The cap also keeps
// three nodes of one -race test process from saturating two cores, where any
// goroutine may wait a few hundred milliseconds to run and no timing holds.
const (
	farOriginRTT       = 50 * time.Millisecond
	farOriginBandwidth = 4 << 20
)

// With the default hedge options, three cold nodes read one file at once: no owner is
// given up on while it fetches a stripe from its origin (it answers its headers first,
// and the first byte's budget allows for that fetch), so the origin serves the file
// once for the cluster.
func TestColdOwnersAreNotHedged(t *testing.T) {
	const size = 12 << 20
	origin := memsrc.New()
	origin.AddPattern("films/a.mkv", 11, size)
	nodes := vfsClusterOf(t, func(int) source.Source {
		return memsrc.WithBandwidth(memsrc.WithLatency(origin, farOriginRTT), farOriginBandwidth)
	}, 3, func(*peer.Options) {})
	origin.ResetStats()
	var wg sync.WaitGroup
	for _, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			readFile(t, nd.fs, "films/a.mkv", 11, size)
		}()
	}
	wg.Wait()
	got := origin.Stats().BytesServed
	t.Logf("origin served %.3f times the file for 3 nodes reading it", float64(got)/size)
	for _, nd := range nodes {
		st := nd.src.Stats()
		t.Logf("%s: %+v", nd.name, st)
		if st.Hedged != 0 || st.Bypassed != 0 {
			t.Errorf("%s: %d peer runs hedged, %d bypassed in all; want none", nd.name, st.Hedged, st.Bypassed)
		}
	}
	if got > size*105/100 {
		t.Errorf("origin served %d bytes, %.2f times the file; want at most 1.05 times", got, float64(got)/size)
	}
}
