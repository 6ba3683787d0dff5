package peerserve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/peer"
	"github.com/playhead/playhead/peer/peerserve"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

// vfsNode is a whole node: vfs.FS over a peer.Source, and the server over that FS.
type vfsNode struct {
	name string
	addr string // of its peer endpoint
	fs   *vfs.FS
	src  *peer.Source
	srv  *peerserve.Handler
}

// Test cluster settings. Stripes of four 256 KiB blocks put a 24 MiB file in 24 stripes
// over the three nodes, so every sequential range crosses owners many times; the origin
// answers after a few milliseconds, so reads really wait on it.
const (
	testStripe = 4
	originRTT  = 3 * time.Millisecond
	// Hedge bounds: this test is about who fetches what, and under -race on a loaded
	// two-core machine an owner's first byte can take a second. A hedged run is read
	// from the origin twice, so the test asserts that none fired and must not make one
	// fire by a tight floor.
	hedgeFloor, hedgeCeiling = 10 * time.Second, 20 * time.Second
	// readTimeout bounds one node's whole read of the file, generous for the same load.
	readTimeout = time.Minute
)

// Three nodes with real caches read one file at once: every byte is right, the origin
// serves the file once for the whole cluster (5% over at most: a block whose cache
// write was skipped while the disk fell behind is fetched again when a peer asks for
// it), and no peer request is hedged. Without the tier the origin serves it three
// times; with ranges that mix owners, or owners that read ahead for a peer, nodes wait
// on each other until the hedge breaks the wait and the run is read twice.
func TestClusterReadsOriginOnce(t *testing.T) {
	const size = 24 << 20
	origin := memsrc.New()
	origin.AddPattern("films/a.mkv", 11, size)
	nodes := vfsCluster(t, memsrc.WithLatency(origin, originRTT), 3)
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
	t.Logf("origin served %d bytes, %.3f times the file, for 3 nodes reading it", got, float64(got)/size)
	if got > size*105/100 {
		t.Errorf("origin served %d bytes, %.2f times the file; want at most 1.05 times", got, float64(got)/size)
	}
	var counted int64 // what the nodes say they read from the origin
	for _, nd := range nodes {
		st := nd.src.Stats()
		counted += st.OriginBytes
		t.Logf("%s: client %+v\nserver %+v\nfetch %+v", nd.name, st, nd.srv.Stats(), nd.fs.FetchStats())
		if st.Hedged != 0 || st.Bypassed != 0 {
			t.Errorf("%s: %d peer runs hedged, %d bypassed in all; want none", nd.name, st.Hedged, st.Bypassed)
		}
		if st.PeerBytes == 0 {
			t.Errorf("%s: no byte came from a peer", nd.name)
		}
	}
	if counted != got {
		t.Errorf("the nodes counted %d origin bytes, the origin served %d", counted, got)
	}
}

// fixedMembers is a membership that never changes. Its names are not the servers'
// addresses: names decide who owns what, so the ports the servers got do not.
type fixedMembers []peer.Member

func (m fixedMembers) Members() ([]peer.Member, uint64) { return m, 0 }

// vfsCluster starts n whole nodes over origin, named node0, node1..., with the test's
// hedge bounds.
func vfsCluster(t *testing.T, origin source.Source, n int) []*vfsNode {
	t.Helper()
	return vfsClusterOf(t, func(int) source.Source { return origin }, n, func(o *peer.Options) {
		o.HedgeFloor, o.HedgeCeiling = hedgeFloor, hedgeCeiling
	})
}

// vfsClusterOf starts n whole nodes, node i over originOf(i), with the default peer
// options but testStripe, changed by tune.
func vfsClusterOf(t *testing.T, originOf func(i int) source.Source, n int, tune func(*peer.Options)) []*vfsNode {
	t.Helper()
	var handlers []*http.Handler
	var all fixedMembers
	for i := 0; i < n; i++ {
		h := new(http.Handler)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h).ServeHTTP(w, r) }))
		t.Cleanup(srv.Close)
		handlers = append(handlers, h)
		all = append(all, peer.Member{Name: fmt.Sprintf("node%d", i), Addr: srv.Listener.Addr().String()})
	}
	id := secret.SourceID("mem:")
	var nodes []*vfsNode
	for i := 0; i < n; i++ {
		po := peer.DefaultOptions()
		po.Self, po.SourceID, po.Secret, po.Members = all[i].Name, id, secret, all
		po.StripeBlocks = testStripe
		tune(&po)
		src, err := peer.NewSource(originOf(i), po)
		if err != nil {
			t.Fatal(err)
		}
		fsys := nodeFS(t, src)
		h, err := peerserve.New(peerserve.Options{SourceID: id, Verifier: peer.NewVerifier(secret, []string{all[i].Addr}),
			Files: peerserve.FromFS(fsys), Owns: src.Owns, Tier: src, Logger: po.Logger})
		if err != nil {
			t.Fatal(err)
		}
		*handlers[i] = h
		nodes = append(nodes, &vfsNode{name: all[i].Name, addr: all[i].Addr, fs: fsys, src: src, srv: h})
	}
	return nodes
}

// The members view of a node, asked with a signed request, names every member with
// the bytes exchanged with it: what the node served each reader (its own requests
// signed with the reader's name) matches what the reader counts from it.
func TestMembersView(t *testing.T) {
	const size = 8 << 20
	origin := memsrc.New()
	origin.AddPattern("films/b.mkv", 5, size)
	nodes := vfsCluster(t, origin, 3)
	readFile(t, nodes[0].fs, "films/b.mkv", 5, size)
	addr := nodes[1].addr
	req, _ := http.NewRequest("GET", "http://"+addr+peer.MembersPath, nil)
	if resp := do(t, req); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unsigned members request: %s, want 401", resp.Status)
	}
	if err := peer.NewSigner(secret).Sign(req); err != nil {
		t.Fatal(err)
	}
	resp := do(t, req)
	var v peerserve.MembersView
	if err := json.NewDecoder(resp.Body).Decode(&v); resp.StatusCode != 200 || err != nil {
		t.Fatalf("members view: %s, %v", resp.Status, err)
	}
	if v.Self != "node1" || len(v.Members) != 3 || !v.Members[0].Self || v.Members[0].Name != "node1" {
		t.Fatalf("view %+v: want node1's, self first, three members", v)
	}
	if v.Server.Unauthorized != 1 || v.Members[0].Served != v.Server.Bytes || v.Server.Bytes == 0 {
		t.Errorf("view %+v: want node1's own row to hold its bytes served, one 401", v)
	}
	var toNode0 int64
	for _, m := range v.Members {
		if m.State != peer.StateStatic || m.Addr == "" {
			t.Errorf("member %+v: want a static member with its address", m)
		}
		if m.Name == "node0" {
			toNode0 = m.Served
		}
	}
	var fromNode1 int64
	for _, m := range nodes[0].src.MemberStats() {
		if m.Name == "node1" {
			fromNode1 = m.Bytes
		}
	}
	if toNode0 == 0 || toNode0 != fromNode1 {
		t.Errorf("node1 served node0 %d bytes, node0 read %d from node1; want the same, not 0", toNode0, fromNode1)
	}
}

func readFile(t *testing.T, fsys *vfs.FS, path string, seed uint64, size int64) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	f, err := fsys.Open(ctx, path)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil || int64(len(got)) != size {
		t.Errorf("read %d bytes: %v", len(got), err)
		return
	}
	want := make([]byte, size)
	pattern.Fill(seed, want, 0)
	if string(got) != string(want) {
		t.Error("bytes differ from the origin's")
	}
}
