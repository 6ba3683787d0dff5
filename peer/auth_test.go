package peer

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testSecretOf(t *testing.T) Secret {
	t.Helper()
	s, err := NewSecret([]byte("sixteen-bytes-at-least"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testPair(t *testing.T) (*Signer, *Verifier) {
	t.Helper()
	s := testSecretOf(t)
	return NewSigner(s), NewVerifier(s, []string{"example.com"}) // httptest.NewRequest's host
}

func TestVerify(t *testing.T) {
	g, v := testPair(t)
	now := time.Unix(1_800_000_000, 0)
	g.now = func() time.Time { return now }
	v.now = func() time.Time { return now }
	sign := func(target string) *httptestReq {
		r := httptest.NewRequest("GET", target, nil)
		if err := g.Sign(r); err != nil {
			t.Fatal(err)
		}
		return &httptestReq{r}
	}
	r := sign("/v1/block?path=a&off=0")
	if err := v.Verify(r.Request); err != nil {
		t.Fatalf("good request refused: %v", err)
	}
	if err := v.Verify(r.Request); !errors.Is(err, ErrReplayed) {
		t.Errorf("replay: %v, want ErrReplayed", err)
	}
	tampered := sign("/v1/block?path=a&off=0")
	tampered.URL.RawQuery = "path=b&off=0"
	tampered.RequestURI = ""
	if err := v.Verify(tampered.Request); !errors.Is(err, ErrBadSignature) {
		t.Errorf("tampered query: %v, want ErrBadSignature", err)
	}
	unsigned := httptest.NewRequest("GET", "/v1/block", nil)
	if err := v.Verify(unsigned); !errors.Is(err, ErrUnsigned) {
		t.Errorf("unsigned: %v, want ErrUnsigned", err)
	}
	old := sign("/v1/block?x=1")
	v.now = func() time.Time { return now.Add(MaxClockSkew + time.Second) }
	if err := v.Verify(old.Request); !errors.Is(err, ErrStale) {
		t.Errorf("stale: %v, want ErrStale", err)
	}
	// The signature names the host: a request for another node is refused, and one
	// whose Host was changed after signing does not match.
	elsewhere := sign("/v1/block?z=1")
	elsewhere.Host = "node-b:7001"
	if err := v.Verify(elsewhere.Request); !errors.Is(err, ErrBadSignature) {
		t.Errorf("host changed after signing: %v, want ErrBadSignature", err)
	}
	forB := httptest.NewRequest("GET", "/v1/block?z=2", nil)
	forB.Host = "node-b:7001"
	if err := g.Sign(forB); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(forB); !errors.Is(err, ErrWrongHost) {
		t.Errorf("signed for another node: %v, want ErrWrongHost", err)
	}
	vB := NewVerifier(testSecretOf(t), []string{"NODE-B:7001"})
	vB.now = g.now
	if err := vB.Verify(forB); err != nil {
		t.Errorf("signed for this node (host in another case): %v", err)
	}
	_, other := testPair(t)
	other.key = []byte("another key")
	if err := other.Verify(sign("/v1/block?y=1").Request); !errors.Is(err, ErrBadSignature) {
		t.Errorf("other key: %v, want ErrBadSignature", err)
	}
}

type httptestReq struct{ *http.Request }

// Nonces are bounded: when the cache is full of live nonces, requests are refused,
// never accepted unchecked; expired nonces make room again.
func TestNoncesBounded(t *testing.T) {
	g, v := testPair(t)
	now := time.Unix(1_800_000_000, 0)
	g.now = func() time.Time { return now }
	v.now = func() time.Time { return now }
	v.maxNonces = 3
	for i := 0; i < 4; i++ {
		r := httptest.NewRequest("GET", fmt.Sprintf("/v1/block?i=%d", i), nil)
		g.Sign(r)
		err := v.Verify(r)
		if want := i < 3; (err == nil) != want {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	now = now.Add(3 * MaxClockSkew)
	r := httptest.NewRequest("GET", "/v1/block?i=9", nil)
	g.Sign(r)
	if err := v.Verify(r); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

func TestSecret(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("tooshort\n"), 0o600)
	if _, err := LoadSecret(short); !errors.Is(err, ErrShortSecret) || strings.Contains(err.Error(), "tooshort") {
		t.Errorf("short secret: %v", err)
	}
	if _, err := LoadSecret(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file accepted")
	}
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("a-secret-long-enough-to-use\n"), 0o600)
	s, err := LoadSecret(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{s.String(), fmt.Sprintf("%v %+v %#v %s", s, s, s, s)} {
		if strings.Contains(out, "secret-long") {
			t.Errorf("secret printed: %s", out)
		}
	}
	if string(s.GossipKey()) == string(s.requestKey()) || len(s.GossipKey()) != 32 {
		t.Error("gossip and request keys must differ, and the gossip key be 32 bytes")
	}
	if s.SourceID("https://user:pw@host/x") == s.SourceID("https://host/x") ||
		strings.Contains(s.SourceID("https://user:pw@host/x"), "pw") {
		t.Error("source IDs must tell specs apart and hide them")
	}
}
