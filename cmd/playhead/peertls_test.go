package main

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/testpki"
	"github.com/playhead/playhead/peer"
)

// withTLS returns a tune for startNodes that gives node i the files of files[i].
func withTLS(files ...testpki.Files) func(i int, p *peerFlags) {
	return func(i int, p *peerFlags) {
		p.tls = tlsFlags{cert: files[i].Cert, key: files[i].Key, ca: files[i].CA}
	}
}

// blockURL is the block endpoint of nd over https.
func blockURL(nd *testNode) string { return "https://" + nd.addr + peer.BlockPath }

// Two nodes under mutual TLS read every byte right, and the reader's peer stripes come
// from the other node over TLS (no peer run failed or was refused).
func TestPeerTLSCluster(t *testing.T) {
	ca := testpki.NewCA(t, "cluster CA")
	nodes := startNodes(t, testOrigin(), 2, withTLS(ca.IssueFiles(t, testpki.Node{}), ca.IssueFiles(t, testpki.Node{})))
	reader, owner := nodes[0], nodes[1]
	checkRead(t, reader.fs)
	st := reader.tier.src.Stats()
	t.Logf("reader over TLS: %+v; owner's server %+v", st, owner.tier.handler.Stats())
	if st.PeerBytes == 0 || st.PeerErrors != 0 || st.Refused != 0 {
		t.Errorf("reader over TLS: %d bytes from the peer, %d errors, %d refused; want bytes and no failure", st.PeerBytes, st.PeerErrors, st.Refused)
	}
	if served := owner.tier.handler.Stats().Bytes; served < st.PeerBytes {
		t.Errorf("owner served %d bytes, the reader got %d from it", served, st.PeerBytes)
	}
	// The tier's own client speaks https: the plain-text endpoint is gone.
	if resp, err := http.Get("http://" + owner.addr + peer.BlockPath); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest { // net/http's answer to HTTP on a TLS port
			t.Errorf("plain HTTP to a TLS node: status %d", resp.StatusCode)
		}
	}
}

// clientWith returns an https client that trusts ca and presents cert and key, if any.
func clientWith(t *testing.T, caPEM, certPEM, keyPEM []byte) *http.Client {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	conf := &tls.Config{RootCAs: roots}
	if certPEM != nil {
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		// Presented whatever CAs the server asks for, as a forger would.
		conf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &c, nil }
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: conf}, Timeout: 10 * time.Second}
}

// A node under TLS refuses, at the handshake and before any HTTP (its 401 counter does
// not move), a client without a certificate and one whose certificate another CA
// signed; a client with a certificate of the CA reaches HTTP, where the request's
// signature still applies: unsigned or signed with another secret, it gets 401.
func TestPeerTLSRefusals(t *testing.T) {
	ca, other := testpki.NewCA(t, "cluster CA"), testpki.NewCA(t, "another CA")
	nodes := startNodes(t, testOrigin(), 2, withTLS(ca.IssueFiles(t, testpki.Node{}), ca.IssueFiles(t, testpki.Node{})))
	nd := nodes[0]
	foreignCert, foreignKey := other.Issue(t, testpki.Node{})
	for name, c := range map[string]*http.Client{
		"no certificate":              clientWith(t, ca.PEM(), nil, nil),
		"certificate of another CA":   clientWith(t, ca.PEM(), foreignCert, foreignKey),
		"node configured for another": mustTLS(t, other, foreignCert, foreignKey).Client(),
	} {
		resp, err := c.Get(blockURL(nd))
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: answered %s; want a refused handshake", name, resp.Status)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
	if u := nd.tier.handler.Stats().Unauthorized; u != 0 {
		t.Errorf("%d requests reached HTTP's 401 through a refused handshake", u)
	}

	cert, key := ca.Issue(t, testpki.Node{})
	good := clientWith(t, ca.PEM(), cert, key)
	wrong, err := peer.NewSecret([]byte("another-cluster-secret"))
	if err != nil {
		t.Fatal(err)
	}
	for name, sign := range map[string]bool{"unsigned": false, "signed with another secret": true} {
		req, _ := http.NewRequest("GET", blockURL(nd)+"?x=1", nil)
		if sign {
			if err := peer.NewSigner(wrong).Sign(req); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := good.Do(req)
		if err != nil {
			t.Fatalf("%s, with a certificate of the CA: %v", name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s, with a certificate of the CA: status %d, want 401", name, resp.StatusCode)
		}
	}
	if u := nodeMetric(t, nd, "playhead_peer_unauthenticated_total", nil); u != 2 {
		t.Errorf("playhead_peer_unauthenticated_total = %v, want the 2 requests without the secret", u)
	}
}

// mustTLS is a node's TLS whose CA is ca.
func mustTLS(t *testing.T, ca *testpki.CA, cert, key []byte) *peer.TLS {
	t.Helper()
	tl, err := peer.NewTLS(cert, key, ca.PEM(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// In a cluster where one node's certificate is another CA's, the others never serve it
// nor are served by it: every read is still right, its peer runs all fail (to the
// origin), and it serves nothing.
func TestPeerTLSForeignNode(t *testing.T) {
	ca, other := testpki.NewCA(t, "cluster CA"), testpki.NewCA(t, "another CA")
	nodes := startNodes(t, testOrigin(), 3, withTLS(ca.IssueFiles(t, testpki.Node{}), ca.IssueFiles(t, testpki.Node{}),
		other.IssueFiles(t, testpki.Node{})))
	foreign := nodes[2]
	for _, nd := range nodes {
		checkRead(t, nd.fs)
	}
	st := foreign.tier.src.Stats()
	t.Logf("foreign node: %+v", st)
	if st.PeerBytes != 0 || st.PeerErrors == 0 {
		t.Errorf("foreign node: %d bytes from peers, %d peer errors; want none and some", st.PeerBytes, st.PeerErrors)
	}
	if served := foreign.tier.handler.Stats().Requests; served != 0 {
		t.Errorf("foreign node's server got %d requests through TLS", served)
	}
}

// Bad TLS files fail the tier's start with an error naming the flag and saying what is
// wrong, and never showing the key.
func TestPeerTLSFlagErrors(t *testing.T) {
	ca, other := testpki.NewCA(t, "cluster CA"), testpki.NewCA(t, "another CA")
	good := ca.IssueFiles(t, testpki.Node{})
	wrongHost := ca.IssueFiles(t, testpki.Node{IPs: []net.IP{net.IPv4(10, 0, 0, 5)}})
	expired := ca.IssueFiles(t, testpki.Node{NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	foreign := other.IssueFiles(t, testpki.Node{})
	mismatched := good
	mismatched.Key = ca.IssueFiles(t, testpki.Node{}).Key
	missing := good
	missing.CA = filepath.Join(t.TempDir(), "missing.crt")
	foreignCA := good
	foreignCA.CA = foreign.CA
	foreign.CA = good.CA
	key, err := os.ReadFile(good.Key)
	if err != nil {
		t.Fatal(err)
	}
	secret := writeSecret(t, "a-cluster-secret-for-tests")
	for _, c := range []struct {
		name  string
		files testpki.Files
		want  string
	}{
		{"CA file missing", missing, "bad --peer-tls-ca"},
		{"key of another certificate", mismatched, "private key does not match"},
		{"certificate for another host", wrongHost, "not valid for 127.0.0.1"},
		{"expired", expired, "expired at"},
		{"certificate of another CA", foreign, "not signed by the CA"},
		{"CA not the certificate's", foreignCA, "not signed by the CA"},
	} {
		p := peerFlags{peers: []string{"127.0.0.1:1"}, http: "127.0.0.1:0", secretFile: secret,
			tls: tlsFlags{cert: c.files.Cert, key: c.files.Key, ca: c.files.CA}}
		tier, err := p.start(testOrigin(), "mem:", testBlock, slog.New(slog.DiscardHandler))
		if err == nil {
			tier.stop()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), string(key[40:80])) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

// A certificate that expires within expiryWarning starts the tier, with a warning that
// says when it expires.
func TestPeerTLSExpiringSoon(t *testing.T) {
	ca := testpki.NewCA(t, "cluster CA")
	files := ca.IssueFiles(t, testpki.Node{NotAfter: time.Now().Add(2 * 24 * time.Hour)})
	var logged strings.Builder
	p := peerFlags{peers: []string{"127.0.0.1:1"}, http: "127.0.0.1:0", secretFile: writeSecret(t, "a-cluster-secret-for-tests"),
		tls: tlsFlags{cert: files.Cert, key: files.Key, ca: files.CA}}
	tier, err := p.start(testOrigin(), "mem:", testBlock, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	tier.stop()
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "expires soon") {
		t.Errorf("no warning for a certificate that expires in 2 days; the log:\n%s", logged.String())
	}
}

// `playhead peers` reaches a node under mutual TLS with a certificate of the cluster's
// CA, and not without one: the node refuses a client without a certificate at the
// handshake, so the command must say it could not reach the endpoint.
func TestPeersCommandOverTLS(t *testing.T) {
	ca := testpki.NewCA(t, "cluster CA")
	files := []testpki.Files{ca.IssueFiles(t, testpki.Node{}), ca.IssueFiles(t, testpki.Node{}), ca.IssueFiles(t, testpki.Node{})}
	nodes := startNodes(t, testOrigin(), 2, withTLS(files[:2]...))
	secret := writeSecret(t, "a-cluster-secret-for-tests")
	c := files[2]
	out, err := runPeers(t, nodes[0].addr, "--peer-secret-file", secret, "--peer-tls-cert", c.Cert, "--peer-tls-key", c.Key, "--peer-tls-ca", c.CA)
	if err != nil || !strings.Contains(out, nodes[1].addr) {
		t.Errorf("peers over TLS with the cluster's certificate: %v\n%s\nwant the table naming %s", err, out, nodes[1].addr)
	}
	if _, err := runPeers(t, nodes[0].addr, "--peer-secret-file", secret); err == nil {
		t.Error("peers without a certificate reached a node under mutual TLS")
	}
	if _, err := runPeers(t, nodes[0].addr, "--peer-secret-file", secret, "--peer-tls-cert", c.Cert); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Errorf("peers with --peer-tls-cert alone: %v; want the three flags' rule", err)
	}
}
