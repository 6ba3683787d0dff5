package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/playhead/playhead/peer"
)

// tlsFlags put the peer endpoint under mutual TLS: all three or none.
type tlsFlags struct {
	cert, key, ca string
}

func (f *tlsFlags) bind(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.cert, "peer-tls-cert", "", "serve the peer endpoint over mutual TLS with this node's certificate (PEM; valid for --peer-http's host, for server and client authentication; needs --peer-tls-key and --peer-tls-ca)")
	fs.StringVar(&f.key, "peer-tls-key", "", "the private key of --peer-tls-cert (PEM)")
	fs.StringVar(&f.ca, "peer-tls-ca", "", "the cluster's CA certificate (PEM): the only issuer trusted for the other nodes' certificates, as servers and as clients")
}

func (f *tlsFlags) any() bool { return f.cert != "" || f.key != "" || f.ca != "" }
func (f *tlsFlags) all() bool { return f.cert != "" && f.key != "" && f.ca != "" }

// expiryWarning: a certificate that expires sooner than this is logged as a warning at
// start, since the files are read once and every handshake fails after it expires
// (the tier then reads everything from the origin); a week leaves time to renew.
const expiryWarning = 7 * 24 * time.Hour

// load reads the files and checks them for a node whose peer HTTP address is addr;
// nil without the flags. Errors name the flag, and never show a key.
func (f *tlsFlags) load(addr string, log *slog.Logger) (*peer.TLS, error) {
	t, err := f.read()
	if t == nil || err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(addr) // checked
	if err := t.CheckHost(host); err != nil {
		return nil, fmt.Errorf("bad --peer-tls-cert for --peer-http %s: %w", addr, err)
	}
	if left := time.Until(t.NotAfter()); left < expiryWarning {
		log.Warn("the peer TLS certificate expires soon: renew it and restart", "expires", t.NotAfter(), "in", left.Round(time.Minute))
	}
	return t, nil
}

// read reads and checks the three files, as a client's: nil without the flags.
func (f *tlsFlags) read() (*peer.TLS, error) {
	if !f.any() {
		return nil, nil
	}
	if !f.all() {
		return nil, fmt.Errorf("--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together")
	}
	var pems [3][]byte
	for i, file := range []struct{ flag, path string }{
		{"--peer-tls-cert", f.cert}, {"--peer-tls-key", f.key}, {"--peer-tls-ca", f.ca}} {
		b, err := os.ReadFile(file.path)
		if err != nil {
			return nil, fmt.Errorf("bad %s: %w", file.flag, err) // names the path and the cause
		}
		pems[i] = b
	}
	t, err := peer.NewTLS(pems[0], pems[1], pems[2], time.Now())
	if err != nil {
		return nil, fmt.Errorf("bad --peer-tls-cert, --peer-tls-key or --peer-tls-ca: %w", err)
	}
	return t, nil
}
