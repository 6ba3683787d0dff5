package peerserve_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/peer"
	"github.com/playhead/playhead/peer/peerserve"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

var secret = func() peer.Secret {
	s, err := peer.NewSecret([]byte("peerserve-test-secret"))
	if err != nil {
		panic(err)
	}
	return s
}()

// nodeFS is a node's vfs.FS over src, with a cache of its own, closed with the test.
func nodeFS(t *testing.T, src source.Source) *vfs.FS {
	t.Helper()
	o := vfs.DefaultOptions()
	o.Cache.Dir = t.TempDir()
	fsys, err := vfs.New(src, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}

// server serves origin through a real vfs.FS with its own cache, accepting requests
// signed for its own address.
func server(t *testing.T, origin source.Source) (*httptest.Server, *peerserve.Handler) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	h, err := peerserve.New(peerserve.Options{SourceID: secret.SourceID("mem:"),
		Verifier: peer.NewVerifier(secret, []string{srv.Listener.Addr().String()}),
		Files:    peerserve.FromFS(nodeFS(t, origin))})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, h
}

// A request signed for node A and sent to node B is refused by B (401, counted), so a
// captured request cannot be spent once more on another node's nonce store; A serves
// it, and a replay to A is refused by A's nonce store.
func TestSignatureNamesTheTarget(t *testing.T) {
	origin := memsrc.New()
	origin.AddPattern("d/f.bin", 3, 1<<20)
	v, _ := origin.Version("d/f.bin")
	srvA, hA := server(t, origin)
	srvB, hB := server(t, origin)
	r := peer.BlockRequest{Source: secret.SourceID("mem:"), Path: "d/f.bin", Off: 0, Len: 1000, Version: v}
	req, _ := http.NewRequest("GET", srvA.URL+peer.BlockPath+"?"+r.Query(), nil)
	if err := peer.NewSigner(secret).Sign(req); err != nil {
		t.Fatal(err)
	}
	toB := req.Clone(context.Background())
	toB.URL.Host, toB.Host = srvB.Listener.Addr().String(), req.URL.Host // the Host A was signed for
	if resp := do(t, toB); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("signed for A, sent to B: %s, want 401", resp.Status)
	}
	rehosted := req.Clone(context.Background())
	rehosted.URL.Host = srvB.Listener.Addr().String() // the Host B expects, the MAC A's
	if resp := do(t, rehosted); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("signed for A, Host rewritten to B: %s, want 401", resp.Status)
	}
	if st := hB.Stats(); st.Unauthorized != 2 || st.Served != 0 {
		t.Errorf("B's stats %+v: want both refused as unauthorized", st)
	}
	if resp := do(t, req); resp.StatusCode != http.StatusOK {
		t.Errorf("signed for A, sent to A: %s, want 200", resp.Status)
	}
	if resp := do(t, req); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("replayed to A: %s, want 401", resp.Status)
	}
	if st := hA.Stats(); st.Unauthorized != 1 || st.Served != 1 {
		t.Errorf("A's stats %+v: want one served, the replay refused", st)
	}
}

func get(t *testing.T, srv *httptest.Server, r peer.BlockRequest, sign bool) (*http.Request, *http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+peer.BlockPath+"?"+r.Query(), nil)
	if sign {
		if err := peer.NewSigner(secret).Sign(req); err != nil {
			t.Fatal(err)
		}
	}
	return req, do(t, req), nil
}

func do(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req.Clone(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestServe(t *testing.T) {
	origin := memsrc.New()
	origin.AddPattern("d/f.bin", 3, 1<<20)
	v, _ := origin.Version("d/f.bin")
	srv, h := server(t, origin)
	id := secret.SourceID("mem:")
	good := peer.BlockRequest{Source: id, Path: "d/f.bin", Off: 1000, Len: 300 << 10, Version: v}

	req, resp, _ := get(t, srv, good, true)
	got, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || err != nil || len(got) != int(good.Len) {
		t.Fatalf("good request: %s, %d bytes, %v", resp.Status, len(got), err)
	}
	want := make([]byte, good.Len)
	pattern.Fill(3, want, good.Off)
	if string(got) != string(want) {
		t.Fatal("served bytes differ from the origin's")
	}
	// Exactly the range's blocks, the first two of the file: no read-ahead, and not
	// the whole small file a first read fetches otherwise.
	if n := origin.Stats().BytesServed; n != 2*peer.DefaultBlockSize {
		t.Errorf("the origin served %d bytes for a range in two blocks, want %d", n, 2*peer.DefaultBlockSize)
	}
	if r := do(t, req); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("replayed request: %s, want 401", r.Status)
	}
	if _, r, _ := get(t, srv, good, false); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("unsigned request: %s, want 401", r.Status)
	}
	for _, c := range []struct {
		name string
		edit func(*peer.BlockRequest)
		code int
	}{
		{"climbs out", func(r *peer.BlockRequest) { r.Path = "../etc/passwd" }, http.StatusForbidden},
		{"absolute", func(r *peer.BlockRequest) { r.Path = "/etc/passwd" }, http.StatusForbidden},
		{"dot element", func(r *peer.BlockRequest) { r.Path = "d/./f.bin" }, http.StatusForbidden},
		{"other source", func(r *peer.BlockRequest) { r.Source = secret.SourceID("https://other/") }, http.StatusNotFound},
		{"other version", func(r *peer.BlockRequest) { r.Version.ETag = `"other"` }, peer.StatusNotThisVersion},
		{"missing file", func(r *peer.BlockRequest) { r.Path = "d/none.bin" }, peer.StatusNotThisVersion},
		{"past the end", func(r *peer.BlockRequest) { r.Off = 1 << 20 }, http.StatusBadRequest},
	} {
		r := good
		c.edit(&r)
		if _, resp, _ := get(t, srv, r, true); resp.StatusCode != c.code {
			t.Errorf("%s: %s, want %d", c.name, resp.Status, c.code)
		}
	}
	st := h.Stats()
	if st.Unauthorized != 2 || st.Served != 1 || st.Refused != 5 || st.NotThisVersion != 2 {
		t.Errorf("stats %+v", st)
	}
}

// hiddenETags is an origin whose listings and Stat give no ETag (as an HTML index does);
// its ranges still carry one.
type hiddenETags struct{ source.Source }

func (h hiddenETags) Stat(ctx context.Context, p string) (source.Entry, error) {
	e, err := h.Source.Stat(ctx, p)
	e.Version.ETag = ""
	return e, err
}

func (h hiddenETags) List(ctx context.Context, p string) ([]source.Entry, error) {
	es, err := h.Source.List(ctx, p)
	for i := range es {
		es[i].Version.ETag = ""
	}
	return es, err
}

// A reader that knows the ETag is refused by an owner that opened the file without one,
// once the owner's read learns the ETag is another: the size and time alone cannot tell
// a same-size replacement within the same second, and the owner asked the origin with
// the time only.
func TestServeRefusesAnotherETagLearnedByTheRead(t *testing.T) {
	origin := memsrc.New()
	origin.AddPattern("d/f.bin", 3, 1<<20)
	v, _ := origin.Version("d/f.bin")
	srv, h := server(t, hiddenETags{origin})
	want := v
	want.ETag = `"a-replacement"`
	r := peer.BlockRequest{Source: secret.SourceID("mem:"), Path: "d/f.bin", Off: 0, Len: 256 << 10, Version: want}
	if _, resp, _ := get(t, srv, r, true); resp.StatusCode != peer.StatusNotThisVersion {
		t.Fatalf("another ETag than the read learned: %s, want %d", resp.Status, peer.StatusNotThisVersion)
	}
	if st := h.Stats(); st.Served != 0 || st.NotThisVersion != 1 {
		t.Errorf("stats %+v", st)
	}
}
