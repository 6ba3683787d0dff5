// Package testpki makes the certificates of a test's cluster: a CA and node
// certificates it signs, with the names, validity and key usages a test asks for, as
// PEM bytes or files. Keys are ECDSA P-256: fast to generate under the race detector.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority of a test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial atomic.Int64

// NewCA returns a fresh CA, valid from an hour ago for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{cert: cert, key: key, pem: pemBlock("CERTIFICATE", der)}
}

// PEM is the CA's certificate.
func (ca *CA) PEM() []byte { return ca.pem }

// Node is what a node certificate holds; the zero value of a field means its default.
type Node struct {
	IPs       []net.IP           // IP SANs; default 127.0.0.1
	NotBefore time.Time          // default an hour ago
	NotAfter  time.Time          // default in a day
	Usages    []x509.ExtKeyUsage // default server and client authentication
}

// Issue returns a node certificate the CA signs and its key, as PEM.
func (ca *CA) Issue(t testing.TB, n Node) (certPEM, keyPEM []byte) {
	t.Helper()
	if n.IPs == nil {
		n.IPs = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	if n.NotBefore.IsZero() {
		n.NotBefore = time.Now().Add(-time.Hour)
	}
	if n.NotAfter.IsZero() {
		n.NotAfter = time.Now().Add(24 * time.Hour)
	}
	if n.Usages == nil {
		n.Usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: "playhead node"},
		NotBefore: n.NotBefore, NotAfter: n.NotAfter, IPAddresses: n.IPs,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: n.Usages,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", kder)
}

// Files are the paths of a node's certificate, key and CA files.
type Files struct{ Cert, Key, CA string }

// IssueFiles issues a node certificate as Issue does and writes it, its key (mode
// 0600) and the CA's certificate to files in a directory of the test.
func (ca *CA) IssueFiles(t testing.TB, n Node) Files {
	t.Helper()
	cert, key := ca.Issue(t, n)
	dir := t.TempDir()
	f := Files{Cert: filepath.Join(dir, "node.crt"), Key: filepath.Join(dir, "node.key"), CA: filepath.Join(dir, "ca.crt")}
	for path, data := range map[string][]byte{f.Cert: cert, f.Key: key, f.CA: ca.pem} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
