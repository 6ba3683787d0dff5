package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/playhead/playhead/metrics"
	"github.com/playhead/playhead/peer"
	"github.com/playhead/playhead/peer/peerserve"
	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/vfs"
)

// peerFlags are the peer tier's flags (issue 16). The tier is on when --peer-listen
// (gossip) or --peers (a static list) is given.
type peerFlags struct {
	listen     string   // --peer-listen: memberlist's host:port
	http       string   // --peer-http: the peer HTTP endpoint's host:port
	join       []string // --join: seeds, memberlist addresses
	peers      []string // --peers: the static list, peer HTTP addresses
	secretFile string   // --peer-secret-file
	tls        tlsFlags // --peer-tls-cert, --peer-tls-key, --peer-tls-ca (peertls.go)
	localCopy  bool     // --peer-local-copy
}

func (p *peerFlags) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&p.listen, "peer-listen", "", "join a cluster of playhead nodes: memberlist's gossip address HOST:PORT (UDP and TCP; HOST as the others reach it); the peer HTTP endpoint is then on PORT+1 unless --peer-http says otherwise")
	f.StringVar(&p.http, "peer-http", "", "HOST:PORT of this node's peer HTTP endpoint (default: --peer-listen's host, port+1); with --peers, required and spelled as the other nodes list it")
	f.StringSliceVar(&p.join, "join", nil, "gossip addresses (HOST:PORT of --peer-listen) of cluster nodes to join, comma separated")
	f.StringSliceVar(&p.peers, "peers", nil, "a fixed cluster without gossip: the peer HTTP addresses (HOST:PORT) of the other nodes, comma separated")
	f.StringVar(&p.secretFile, "peer-secret-file", "", "file holding the cluster's shared secret (at least 16 bytes), required with --peer-listen or --peers")
	f.BoolVar(&p.localCopy, "peer-local-copy", false, "also write the blocks read from their owners to this node's cache (default: only the owner caches a block, so the nodes' caches add up and a copy from peers writes to disk only what memory cannot hold for its reader)")
	p.tls.bind(cmd)
}

func (p *peerFlags) enabled() bool { return p.listen != "" || len(p.peers) > 0 }

// check validates the flags' combination and addresses, before anything listens.
func (p *peerFlags) check() error {
	switch {
	case !p.enabled():
		if len(p.join) > 0 || p.http != "" || p.secretFile != "" || p.tls.any() || p.localCopy {
			return errors.New("--join, --peer-http, --peer-secret-file, --peer-local-copy and --peer-tls-* need --peer-listen or --peers")
		}
		return nil
	case p.listen != "" && len(p.peers) > 0:
		return errors.New("--peer-listen (gossip) and --peers (static list) exclude each other: choose one")
	case len(p.peers) > 0 && len(p.join) > 0:
		return errors.New("--join needs --peer-listen: a static --peers list does not gossip")
	case p.secretFile == "":
		return errors.New("the peer tier needs --peer-secret-file: peer traffic is authenticated with it")
	case len(p.peers) > 0 && p.http == "":
		return errors.New("--peers needs --peer-http: this node's address as the others list it")
	case p.tls.any() && !p.tls.all():
		return errors.New("--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together: give all three or none")
	}
	if p.listen != "" {
		if err := checkAddr("--peer-listen", p.listen, true); err != nil {
			return err
		}
	}
	if p.http != "" {
		if err := checkAddr("--peer-http", p.http, true); err != nil {
			return err
		}
	}
	for _, a := range p.join {
		if err := checkAddr("--join", a, false); err != nil {
			return err
		}
	}
	for _, a := range p.peers {
		if err := checkAddr("--peers", a, false); err != nil {
			return err
		}
	}
	return nil
}

// checkAddr checks that addr is HOST:PORT with a port number, and, when concrete is set,
// a host the other nodes can reach (not empty, not 0.0.0.0 or ::).
func checkAddr(flag, addr string, concrete bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad %s %q: %w", flag, addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("bad %s %q: the port must be a number from 1 to 65535", flag, addr)
	}
	if ip := net.ParseIP(host); concrete && (host == "" || (ip != nil && ip.IsUnspecified())) {
		return fmt.Errorf("bad %s %q: give the address the other nodes reach this one at, not a wildcard", flag, addr)
	}
	return nil
}

// httpAddr is the peer HTTP endpoint's address: --peer-http, else --peer-listen's port+1.
func (p *peerFlags) httpAddr() string {
	if p.http != "" {
		return p.http
	}
	host, port, _ := net.SplitHostPort(p.listen) // checked
	n, _ := strconv.Atoi(port)
	return net.JoinHostPort(host, strconv.Itoa(n+1))
}

// peerTier is a running peer tier: the membership, the wrapped source and the server.
type peerTier struct {
	src     *peer.Source
	secret  peer.Secret
	id      string
	members peer.Membership
	addr    string       // the peer HTTP address the others reach this node at (signed for)
	gossip  *peer.Gossip // nil with --peers
	ln      net.Listener
	tls     *peer.TLS          // nil without --peer-tls-*
	handler *peerserve.Handler // set by serve, before the metrics are served
	server  *http.Server
	log     *slog.Logger
}

var _ metrics.PeerTier = (*peerTier)(nil)

// ClientStats implements metrics.PeerTier.
func (t *peerTier) ClientStats() peer.Stats { return t.src.Stats() }

// ServerStats implements metrics.PeerTier.
func (t *peerTier) ServerStats() metrics.ServerStats {
	if t.handler == nil {
		return metrics.ServerStats{}
	}
	s := t.handler.Stats()
	return metrics.ServerStats{Served: s.Served, ServedBytes: s.Bytes, Unauthenticated: s.Unauthorized}
}

// LiveMembers implements metrics.PeerTier.
func (t *peerTier) LiveMembers() int {
	ms, _ := t.members.Members()
	return len(ms)
}

// start listens on the peer HTTP address, joins the cluster and wraps origin. The
// server starts answering once serve is given the FS.
func (p *peerFlags) start(origin source.Source, spec string, blockSize int64, log *slog.Logger) (*peerTier, error) {
	secret, err := peer.LoadSecret(p.secretFile)
	if err != nil {
		return nil, fmt.Errorf("bad --peer-secret-file: %w", err)
	}
	t := &peerTier{secret: secret, id: secret.SourceID(spec), log: log}
	addr := p.httpAddr()
	t.addr = addr
	if t.tls, err = p.tls.load(addr, log); err != nil {
		return nil, err
	}
	if t.ln, err = net.Listen("tcp", addr); err != nil {
		return nil, fmt.Errorf("peer HTTP endpoint %s: %w", addr, err)
	}
	self := addr
	if p.listen != "" {
		g, err := peer.JoinGossip(peer.GossipOptions{Bind: p.listen, HTTPAddr: addr, Seeds: p.join, Secret: secret, Logger: log})
		if err != nil {
			t.ln.Close()
			return nil, fmt.Errorf("bad --peer-listen or --join: %w", err)
		}
		t.gossip, t.members, self = g, g, g.LocalName()
	} else {
		t.members = peer.NewStatic(addr, p.peers)
	}
	o := peer.DefaultOptions()
	o.BlockSize, o.Self, o.SourceID, o.Secret, o.Members, o.Logger = blockSize, self, t.id, secret, t.members, log
	o.LocalCopy = p.localCopy
	if t.tls != nil {
		o.Client, o.Scheme = t.tls.Client(), "https"
	}
	if t.src, err = peer.NewSource(origin, o); err != nil {
		t.stop()
		return nil, err
	}
	return t, nil
}

// serve answers the other nodes' block requests from fsys.
func (t *peerTier) serve(fsys *vfs.FS) error {
	h, err := peerserve.New(peerserve.Options{SourceID: t.id, Verifier: peer.NewVerifier(t.secret, []string{t.addr, t.ln.Addr().String()}),
		Files: peerserve.FromFS(fsys), Owns: t.src.Owns, Tier: t.src, Logger: t.log})
	if err != nil {
		return err
	}
	t.handler = h
	// The server's own errors are mostly refused TLS handshakes: a stranger's, or a
	// node's whose certificate the CA did not sign, which that node's metrics show as
	// peer errors. Debug, as the handler's refusals are: a stranger must not fill the log.
	t.server = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(t.log.Handler(), slog.LevelDebug)}
	serve := func() error { return t.server.Serve(t.ln) }
	if t.tls != nil {
		t.tls.Server(t.server)
		serve = func() error { return t.server.ServeTLS(t.ln, "", "") }
	}
	go func() {
		if err := serve(); err != nil && err != http.ErrServerClosed {
			t.log.Error("peer server", "err", err)
		}
	}()
	t.log.Info("peer tier on", "http", t.ln.Addr().String(), "gossip", t.gossip != nil, "tls", t.tls != nil)
	return nil
}

// leaveTimeout bounds how long a stopping node waits for its leave to spread: the
// others then drop it at once instead of after failure detection.
const leaveTimeout = time.Second

// stop leaves the cluster and closes the server.
func (t *peerTier) stop() {
	if t.gossip != nil {
		if err := t.gossip.Leave(leaveTimeout); err != nil {
			t.log.Warn("leaving the peer cluster", "err", err)
		}
		t.gossip.Shutdown()
	}
	if t.server != nil {
		t.server.Close()
	} else {
		t.ln.Close()
	}
}
