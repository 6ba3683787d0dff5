package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/metrics"
	"github.com/playhead/playhead/peer"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

// Test cluster geometry: 64 KiB blocks make 2 MiB stripes, so a 32 MiB file is 16
// stripes, and both nodes of a pair own some (all on one node: one chance in 2^15,
// whatever ports the nodes got, which decide ownership through their names).
const (
	testBlock    = 64 << 10
	testFileSize = 32 << 20
	testSeed     = 21
)

// testNode is a node of an in-process cluster: the peer tier as the mount command
// starts it, the engine over it and the mount's metrics.
type testNode struct {
	addr string
	tier *peerTier
	fs   *vfs.FS
	met  *metrics.Metrics
}

// freeAddrs returns n loopback addresses whose ports were free a moment ago: a static
// cluster's nodes must know each other's addresses before any of them listens.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}

// writeSecret writes a cluster secret to a file of the test and returns its path.
func writeSecret(t *testing.T, secret string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// testOrigin is a memsrc holding one pattern file, "f.bin".
func testOrigin() *memsrc.Source {
	mem := memsrc.New()
	mem.AddPattern("f.bin", testSeed, testFileSize)
	return mem
}

// startNodes starts a static cluster of n nodes over origin, as runMount wires them
// (peerFlags.start, newFS, watchMount), each with its own cache; tune, if not nil,
// changes node i's flags first. The nodes stop when the test ends.
func startNodes(t *testing.T, origin source.Source, n int, tune func(i int, p *peerFlags)) []*testNode {
	t.Helper()
	addrs, secret := freeAddrs(t, n), writeSecret(t, "a-cluster-secret-for-tests")
	log := slog.New(slog.DiscardHandler)
	var nodes []*testNode
	for i := range n {
		p := peerFlags{http: addrs[i], secretFile: secret}
		for j, a := range addrs {
			if j != i {
				p.peers = append(p.peers, a)
			}
		}
		if tune != nil {
			tune(i, &p)
		}
		tier, err := p.start(origin, "mem:", testBlock, log)
		if err != nil {
			t.Fatal(err)
		}
		opts := vfs.DefaultOptions()
		opts.Cache.Dir, opts.Cache.BlockSize = t.TempDir(), testBlock
		opts.Fetch.IOTimeout = 20 * time.Second // a broken test fails, never hangs
		opts.Logger = log
		nd := &testNode{addr: addrs[i], tier: tier, met: metrics.New("mem")}
		opts.Fetch.Observer = nd.met
		if nd.fs, err = newFS(tier.src, opts, tier); err != nil {
			t.Fatal(err)
		}
		watchMount(nd.met, nd.fs, tier)
		t.Cleanup(func() { closeMount(nd.fs, tier, false, log) })
		nodes = append(nodes, nd)
	}
	return nodes
}

// checkRead reads f.bin through fsys and checks every byte against the pattern.
func checkRead(t *testing.T, fsys *vfs.FS) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := fsys.Open(ctx, "f.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, testFileSize)
	pattern.Fill(testSeed, want, 0)
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes that differ from the origin's %d", len(got), len(want))
	}
}

// nodeMetric gathers nd's registry and returns the value of name with labels.
func nodeMetric(t *testing.T, nd *testNode, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := nd.met.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("%s: no %s%v", nd.addr, name, labels)
	return 0
}

// A mount with the peer tier shows it in its metrics: the reader's bytes split between
// the peer and the origin tiers as its peer.Source counted them, the owner's server
// counts what it served, each node sees both members, and an unsigned request is
// counted as unauthenticated.
func TestPeerTierMetrics(t *testing.T) {
	nodes := startNodes(t, testOrigin(), 2, nil)
	reader, owner := nodes[0], nodes[1]
	checkRead(t, reader.fs)
	tier := func(nd *testNode, name, tier string) float64 {
		return nodeMetric(t, nd, "playhead_tier_"+name+"_total", map[string]string{"tier": tier})
	}
	st := reader.tier.src.Stats()
	peerBytes, originBytes := tier(reader, "bytes", "peer"), tier(reader, "bytes", "origin")
	t.Logf("reader: %+v; peer tier %v bytes, origin tier %v bytes", st, peerBytes, originBytes)
	if peerBytes == 0 || originBytes == 0 || peerBytes != float64(st.PeerBytes) || originBytes != float64(st.OriginBytes) {
		t.Errorf("reader's tiers: peer %v bytes, origin %v; want both above 0 and as peer.Source counted them", peerBytes, originBytes)
	}
	if runs := tier(reader, "requests", "peer"); runs != float64(st.PeerRuns) || runs == 0 {
		t.Errorf("reader's peer requests %v, peer.Source counted %d runs", runs, st.PeerRuns)
	}
	if served := nodeMetric(t, owner, "playhead_peer_served_bytes_total", nil); served < peerBytes {
		t.Errorf("owner served %v bytes, the reader got %v from peers", served, peerBytes)
	}
	if hedged := nodeMetric(t, reader, "playhead_peer_bypassed_total", map[string]string{"reason": "hedge"}); hedged != float64(st.Hedged) {
		t.Errorf("bypassed{reason=hedge} %v, peer.Source counted %d", hedged, st.Hedged)
	}
	for _, nd := range nodes {
		if m := nodeMetric(t, nd, "playhead_peer_members", nil); m != 2 {
			t.Errorf("%s: playhead_peer_members %v, want 2", nd.addr, m)
		}
	}
	resp, err := http.Get("http://" + owner.addr + peer.BlockPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if u := nodeMetric(t, owner, "playhead_peer_unauthenticated_total", nil); resp.StatusCode != http.StatusUnauthorized || u != 1 {
		t.Errorf("unsigned request: status %d, playhead_peer_unauthenticated_total %v; want 401 and 1", resp.StatusCode, u)
	}
}
