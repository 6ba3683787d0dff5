package peer_test

import (
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/testpki"
	"github.com/playhead/playhead/peer"
)

// NewTLS refuses, each with an error saying what is wrong, the files that would fail
// every handshake later; a certificate without the --peer-http host fails CheckHost.
func TestNewTLSChecks(t *testing.T) {
	ca, other := testpki.NewCA(t, "cluster CA"), testpki.NewCA(t, "another CA")
	now := time.Now()
	cert, key := ca.Issue(t, testpki.Node{})
	_, otherKey := ca.Issue(t, testpki.Node{})
	foreign, foreignKey := other.Issue(t, testpki.Node{})
	expired, expiredKey := ca.Issue(t, testpki.Node{NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)})
	early, earlyKey := ca.Issue(t, testpki.Node{NotBefore: now.Add(time.Hour)})
	serverOnly, serverOnlyKey := ca.Issue(t, testpki.Node{Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	for _, c := range []struct {
		name           string
		cert, key, cas []byte
		want           string // in the error; "" means valid
	}{
		{"good", cert, key, ca.PEM(), ""},
		{"key of another certificate", cert, otherKey, ca.PEM(), "certificate and key"},
		{"key file empty", cert, nil, ca.PEM(), "certificate and key"},
		{"CA file without a certificate", cert, key, []byte("not PEM"), "CA file"},
		{"certificate of another CA", foreign, foreignKey, ca.PEM(), "not signed by the CA"},
		{"expired", expired, expiredKey, ca.PEM(), "expired at"},
		{"not yet valid", early, earlyKey, ca.PEM(), "not valid before"},
		{"server authentication only", serverOnly, serverOnlyKey, ca.PEM(), "client authentication"},
	} {
		_, err := peer.NewTLS(c.cert, c.key, c.cas, now)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
	tl, err := peer.NewTLS(cert, key, ca.PEM(), now)
	if err != nil {
		t.Fatal(err)
	}
	if err := tl.CheckHost("127.0.0.1"); err != nil {
		t.Errorf("CheckHost of the certificate's own IP: %v", err)
	}
	if err := tl.CheckHost("10.0.0.5"); err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("CheckHost of another IP: %v, want an error naming the certificate's", err)
	}
	ipv6, ipv6Key := ca.Issue(t, testpki.Node{IPs: []net.IP{net.ParseIP("::1")}})
	if tl, err = peer.NewTLS(ipv6, ipv6Key, ca.PEM(), now); err != nil || tl.CheckHost("::1") != nil {
		t.Errorf("a certificate for ::1: %v", err)
	}
}
