package peerserve_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/peer"
	"github.com/playhead/playhead/peer/peerserve"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

// vfsNode is a whole node: vfs.FS over a peer.Source, and the server over that FS.
type vfsNode struct {
	fs  *vfs.FS
	src *peer.Source
	srv *peerserve.Handler
}

// Three nodes with real caches read one file: every byte is right, and the origin
// serves the file about once for the whole cluster (the owners fill, the others ask).
func TestClusterReadsOriginOnce(t *testing.T) {
	const size = 8 << 20
	origin := memsrc.New()
	origin.AddPattern("films/a.mkv", 11, size)
	nodes := vfsCluster(t, origin, 3)
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
	t.Logf("origin served %d bytes for 3 nodes reading %d", got, size)
	// Not exactly once: a node's own range stream delivers blocks in order, so a block
	// it owns can wait behind a block it asked a peer for, whose owner may be waiting
	// the same way on this node; the hedge breaks such a wait, and the hedged run is
	// read from the origin twice (known, issue 16). Without the tier it is 3 times.
	if got > size*2 {
		t.Errorf("origin served %d bytes, want about %d", got, size)
	}
	var peerBytes int64
	for _, nd := range nodes {
		peerBytes += nd.src.Stats().PeerBytes
		t.Logf("client %+v\nserver %+v", nd.src.Stats(), nd.srv.Stats())
	}
	if peerBytes == 0 {
		t.Error("no byte came from a peer")
	}
}

func vfsCluster(t *testing.T, origin *memsrc.Source, n int) []*vfsNode {
	t.Helper()
	var handlers []*http.Handler
	var all []string
	for i := 0; i < n; i++ {
		h := new(http.Handler)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h).ServeHTTP(w, r) }))
		t.Cleanup(srv.Close)
		handlers = append(handlers, h)
		all = append(all, srv.Listener.Addr().String())
	}
	id := secret.SourceID("mem:")
	var nodes []*vfsNode
	for i := 0; i < n; i++ {
		po := peer.DefaultOptions()
		po.Self, po.SourceID, po.Secret, po.Members = all[i], id, secret, peer.NewStatic(all[i], all)
		// This test is about single flight, not hedging: under -race on a loaded machine
		// an owner's first byte can pass the 50 ms default floor, and each hedged run is
		// read from the origin twice (by the owner and by the reader).
		po.HedgeFloor, po.HedgeCeiling = 500*time.Millisecond, 2*time.Second
		src, err := peer.NewSource(origin, po)
		if err != nil {
			t.Fatal(err)
		}
		o := vfs.DefaultOptions()
		o.Cache.Dir = t.TempDir()
		fsys, err := vfs.New(src, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fsys.Close() })
		h, err := peerserve.New(peerserve.Options{SourceID: id, Verifier: peer.NewVerifier(secret),
			Files: peerserve.FromFS(fsys), Owns: src.Owns})
		if err != nil {
			t.Fatal(err)
		}
		*handlers[i] = h
		nodes = append(nodes, &vfsNode{fs: fsys, src: src, srv: h})
	}
	return nodes
}

func readFile(t *testing.T, fsys *vfs.FS, path string, seed uint64, size int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
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
