package peer_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/fetch"
	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/peer"
	"github.com/playhead/playhead/peer/peerserve"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
)

// testBlock and testStripe are small so that a few hundred KiB spread over every node:
// a stripe of two blocks, 32 KiB.
const (
	testBlock  = 16 << 10
	testStripe = 2
)

// Hedge bounds of the test clusters: these tests are about who serves what, not about
// the hedge, and under -race on a loaded machine an answer can take a second; a hedged
// run is read from the origin twice. The hedge tests set their own.
const (
	testHedgeFloor   = 5 * time.Second
	testHedgeCeiling = 10 * time.Second
)

// readTimeout bounds one read of a test file through the cluster, generous for the
// same load.
const readTimeout = time.Minute

var _ = (fetch.RunBounds)((*peer.Source)(nil))

var testSecret = mustSecret("0123456789abcdef-test-secret")

func mustSecret(s string) peer.Secret {
	sec, err := peer.NewSecret([]byte(s))
	if err != nil {
		panic(err)
	}
	return sec
}

// members is a settable membership.
type members struct {
	mu  sync.Mutex
	ms  []peer.Member
	gen uint64
}

func (m *members) Members() ([]peer.Member, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ms, m.gen
}

func (m *members) set(ms []peer.Member) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ms, m.gen = ms, m.gen+1
}

// node is one in-process node: its peer.Source and its server.
type node struct {
	name    string
	src     *peer.Source
	handler atomic.Pointer[http.Handler] // swapped by tests that break a node
	server  *httptest.Server
	serve   *peerserve.Handler
}

// srcFiles is the server's Files over the node's own peer.Source (no cache): a test
// stand-in for vfs.FS that reads with the request's ctx, so the FromPeer mark is used.
type srcFiles struct{ src source.Source }

func (f srcFiles) Open(ctx context.Context, path string, _ source.Range) (peerserve.File, error) {
	e, err := f.src.Stat(ctx, path)
	if err != nil {
		return nil, err
	}
	return &srcFile{src: f.src, path: path, v: e.Version}, nil
}

type srcFile struct {
	src  source.Source
	path string
	v    source.Version
}

func (f *srcFile) Version() source.Version { return f.v }
func (f *srcFile) Close() error            { return nil }
func (f *srcFile) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	b, err := f.src.OpenRange(ctx, f.path, source.Range{Off: off, Len: int64(len(p))}, f.v)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	return io.ReadFull(b, p)
}

// cluster starts n nodes over origin, sharing one membership. The nodes are named
// node0, node1...: the names, not the ports the servers got, decide who owns what, so
// every run of a test splits a file among the nodes the same way.
func cluster(t testing.TB, origin source.Source, n int, tune func(*peer.Options)) ([]*node, *members) {
	t.Helper()
	ms := &members{}
	var nodes []*node
	var all []peer.Member
	for i := 0; i < n; i++ {
		nd := &node{name: fmt.Sprintf("node%d", i)}
		nd.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			(*nd.handler.Load()).ServeHTTP(w, r)
		}))
		t.Cleanup(nd.server.Close)
		all = append(all, peer.Member{Name: nd.name, Addr: nd.server.Listener.Addr().String()})
		nodes = append(nodes, nd)
	}
	ms.set(all)
	id := testSecret.SourceID("mem:test")
	for _, nd := range nodes {
		o := peer.DefaultOptions()
		o.BlockSize, o.StripeBlocks, o.Self, o.SourceID, o.Secret, o.Members = testBlock, testStripe, nd.name, id, testSecret, ms
		o.HedgeFloor, o.HedgeCeiling = testHedgeFloor, testHedgeCeiling
		if tune != nil {
			tune(&o)
		}
		src, err := peer.NewSource(origin, o)
		if err != nil {
			t.Fatal(err)
		}
		nd.src = src
		h, err := peerserve.New(peerserve.Options{SourceID: id, Verifier: peer.NewVerifier(testSecret, []string{nd.server.Listener.Addr().String()}),
			Files: srcFiles{src}, Owns: src.Owns})
		if err != nil {
			t.Fatal(err)
		}
		nd.serve = h
		var hh http.Handler = h
		nd.handler.Store(&hh)
	}
	return nodes, ms
}

// readAll reads r of path through src and checks every byte against the pattern.
func readAll(t testing.TB, src source.Source, path string, seed uint64, r source.Range, want source.Version) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	b, err := src.OpenRange(ctx, path, r, want)
	if err != nil {
		t.Fatalf("OpenRange(%q, %+v): %v", path, r, err)
	}
	defer b.Close()
	got, err := io.ReadAll(b)
	if err != nil {
		t.Fatalf("read %q: %v after %d bytes", path, err, len(got))
	}
	end := r.End()
	if end < 0 || end > want.Size {
		end = want.Size
	}
	if int64(len(got)) != end-r.Off {
		t.Fatalf("read %d bytes, want %d", len(got), end-r.Off)
	}
	wantBytes := make([]byte, len(got))
	pattern.Fill(seed, wantBytes, r.Off)
	for i := range got {
		if got[i] != wantBytes[i] {
			t.Fatalf("byte at %d is %#x, want %#x", r.Off+int64(i), got[i], wantBytes[i])
		}
	}
	if !b.Version().Matches(want) {
		t.Fatalf("body version %v, want %v", b.Version(), want)
	}
}

func addFile(t testing.TB, m *memsrc.Source, path string, seed uint64, size int64) source.Version {
	t.Helper()
	m.AddPattern(path, seed, size)
	v, _ := m.Version(path)
	return v
}
