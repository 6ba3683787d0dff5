package peer

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// TLS is a node's mutual TLS on the peer endpoint: one certificate, presented both by
// the node's server and by its client, and the cluster's CA, the only issuer either end
// trusts. A server then refuses at the handshake any client without a certificate of
// the CA, before a byte of HTTP, and a client talks only to servers the CA vouches for
// at the address it dialled. The request signature (auth.go) still applies inside:
// TLS says a node holds a certificate of the CA, the signature that it holds the secret.
// Gossip is not carried over it: memberlist encrypts it with a key of the secret.
type TLS struct {
	cert  tls.Certificate
	leaf  *x509.Certificate
	roots *x509.CertPool
}

// NewTLS builds a node's TLS from PEM: its certificate (the leaf first, then any
// intermediates), the certificate's private key and the CA's certificates. It checks
// what would otherwise fail every handshake later, each with an error saying which:
// the key matches the certificate, the CA signed it, it is valid at now, and it may
// serve and be a client (its extended key usages, when it lists any).
func NewTLS(certPEM, keyPEM, caPEM []byte, now time.Time) (*TLS, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("peer TLS: certificate and key: %w", err)
	}
	leaf := cert.Leaf // parsed by X509KeyPair
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("peer TLS: no PEM certificate in the CA file")
	}
	switch {
	case now.After(leaf.NotAfter):
		return nil, fmt.Errorf("peer TLS: the certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, fmt.Errorf("peer TLS: the certificate is not valid before %s", leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("peer TLS: intermediate certificate: %w", err)
		}
		inter.AddCert(c)
	}
	for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{use}})
		var unknown x509.UnknownAuthorityError
		switch {
		case errors.As(err, &unknown):
			return nil, errors.New("peer TLS: the certificate is not signed by the CA")
		case err != nil:
			return nil, fmt.Errorf("peer TLS: the certificate does not verify against the CA (it must allow both server and client authentication): %w", err)
		}
	}
	return &TLS{cert: cert, leaf: leaf, roots: roots}, nil
}

// CheckHost returns an error unless the certificate is valid for host, the host part of
// the node's peer HTTP address: the others dial that address and check its name.
func (t *TLS) CheckHost(host string) error {
	if err := t.leaf.VerifyHostname(host); err != nil {
		names := append([]string(nil), t.leaf.DNSNames...)
		for _, ip := range t.leaf.IPAddresses {
			names = append(names, ip.String())
		}
		return fmt.Errorf("peer TLS: the certificate is not valid for %s, which the other nodes dial (it names %s)",
			host, strings.Join(names, ", "))
	}
	return nil
}

// NotAfter is when the certificate expires; the node must be given a new one and
// restarted before, as the files are read once.
func (t *TLS) NotAfter() time.Time { return t.leaf.NotAfter }

// The peer endpoint speaks HTTP/1.1 over TLS as it does in the clear: each run in flight
// has a connection of its own, so a stalled answer holds back no other (HTTP/2 would
// share one connection's flow control among them), and the tier behaves the same with
// and without TLS. TLS 1.3: every node is playhead, so no older peer needs 1.2.
func http1Only() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	return p
}

// ServerConfig is the peer server's TLS: its certificate, and the client certificate
// required and verified against the CA.
func (t *TLS) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{t.cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: t.roots}
}

// Server sets srv up to serve the peer endpoint over TLS (srv.ServeTLS(ln, "", "")).
func (t *TLS) Server(srv *http.Server) {
	srv.TLSConfig = t.ServerConfig()
	srv.Protocols = http1Only()
}

// ClientConfig is the peer client's TLS: its certificate for the servers, and the CA as
// the only root. Sessions are resumed: a hedged or cut run closes its connection, and a
// full handshake (signatures and chain checks at both ends) on the next one would eat
// into that run's hedge threshold.
func (t *TLS) ClientConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{t.cert}, RootCAs: t.roots,
		ClientSessionCache: tls.NewLRUClientSessionCache(sessionCacheSize)}
}

// sessionCacheSize is how many peers' TLS sessions a client keeps, one a peer: a cluster
// has tens of nodes; past this the oldest peer's next connection does a full handshake.
const sessionCacheSize = 256

// Client returns the client for Options.Client, with Options.Scheme "https": the
// default client's keep-alive connections, over TLS.
func (t *TLS) Client() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = idleConnsPerPeer
	tr.Proxy = nil // peers are on the cluster's network: an HTTP(S)_PROXY meant for the origin must not carry them
	tr.TLSClientConfig = t.ClientConfig()
	tr.Protocols = http1Only()
	return &http.Client{Transport: tr}
}
