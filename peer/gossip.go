package peer

import (
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// GossipOptions configure a Gossip membership.
type GossipOptions struct {
	// Name is this node's name in the cluster; empty means the bind address.
	Name string
	// Bind is host:port memberlist listens on (UDP and TCP). Port 0 picks a free port.
	Bind string
	// Advertise is host:port the others reach memberlist at; empty means Bind's, which
	// must then not be a wildcard address.
	Advertise string
	// HTTPAddr is host:port of this node's peer HTTP endpoint, carried to the others in
	// the node's metadata. Required.
	HTTPAddr string
	// Seeds are host:port of nodes to join; empty starts a cluster of one.
	Seeds []string
	// Secret encrypts and authenticates the gossip (its GossipKey). Required.
	Secret Secret
	// Logger receives memberlist's logs. nil means slog.Default().
	Logger *slog.Logger
}

// LAN timing. memberlist's LAN defaults (1 s probes, suspicion of 4 intervals) take
// 5 to 7 s to drop a failed node of a small cluster; a reader whose blocks that node
// owned pays the hedge threshold on every run until then. Halving the probe interval
// and timeout keeps a LAN's sub-millisecond round trips far inside the timeout while
// dropping a failed node in 2 to 4 s; the gossip traffic doubles, still a few hundred
// bytes a second per node.
//
// pushPullInterval: a join or a rejoin spreads by gossip, each broadcast sent a few
// times to a few random members, so a member can miss it; it then learns the node only
// at its next full state exchange with another member, 30 s apart by memberlist's
// default. An 8-process cluster here missed a join for over 30 s; every 5 s bounds that
// lag, for a state of a few hundred bytes a member (memberlist stretches the interval
// itself for clusters over 32 members).
const (
	probeInterval    = 500 * time.Millisecond
	probeTimeout     = 250 * time.Millisecond
	suspicionMult    = 3
	pushPullInterval = 5 * time.Second
)

// metaLimit is memberlist's cap on node metadata (MetaMaxSize, 512 bytes).
const metaLimit = memberlist.MetaMaxSize

// Gossip is a membership kept by memberlist (SWIM gossip with failure detection).
type Gossip struct {
	ml   *memberlist.Memberlist
	note *notifier
	log  *slog.Logger

	mu      sync.Mutex
	gone    map[string]MemberState // members that died or left, by name, until they rejoin; guarded by mu
	leaving map[string]bool        // members that said they are leaving; guarded by mu
}

// JoinGossip starts memberlist and joins the seeds. At least one seed must answer when
// any is given, so a typo in --join fails the mount rather than leaving a lone node.
func JoinGossip(o GossipOptions) (*Gossip, error) {
	cfg, g, err := gossipConfig(o)
	if err != nil {
		return nil, err
	}
	ml, err := memberlist.Create(cfg)
	if err != nil {
		return nil, fmt.Errorf("peer: start memberlist on %s: %w", o.Bind, err)
	}
	g.ml = ml
	if len(o.Seeds) > 0 {
		if _, err := ml.Join(o.Seeds); err != nil {
			ml.Shutdown()
			return nil, fmt.Errorf("peer: join %v: %w", o.Seeds, err)
		}
	}
	return g, nil
}

// gossipConfig turns o into memberlist's config, with g as its event delegate.
func gossipConfig(o GossipOptions) (*memberlist.Config, *Gossip, error) {
	if o.Secret.IsZero() {
		return nil, nil, errors.New("peer: gossip needs the shared secret")
	}
	if o.HTTPAddr == "" || len(o.HTTPAddr) > metaLimit {
		return nil, nil, fmt.Errorf("peer: bad peer HTTP address %q", o.HTTPAddr)
	}
	host, port, err := splitHostPort(o.Bind)
	if err != nil {
		return nil, nil, fmt.Errorf("peer: bad bind address: %w", err)
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	g := &Gossip{note: newNotifier(), log: logger, gone: map[string]MemberState{}, leaving: map[string]bool{}}
	cfg := memberlist.DefaultLANConfig()
	cfg.Name = o.Name
	if cfg.Name == "" {
		cfg.Name = o.Bind
	}
	cfg.BindAddr, cfg.BindPort = host, port
	cfg.AdvertisePort = port
	if o.Advertise != "" {
		if cfg.AdvertiseAddr, cfg.AdvertisePort, err = splitHostPort(o.Advertise); err != nil {
			return nil, nil, fmt.Errorf("peer: bad advertise address: %w", err)
		}
	}
	cfg.ProbeInterval, cfg.ProbeTimeout, cfg.SuspicionMult = probeInterval, probeTimeout, suspicionMult
	cfg.PushPullInterval = pushPullInterval
	cfg.SecretKey = o.Secret.GossipKey()
	cfg.GossipVerifyIncoming, cfg.GossipVerifyOutgoing = true, true
	cfg.Logger = log.New(slogWriter{log: logger}, "", 0)
	cfg.Events = g
	cfg.Delegate = &gossipDelegate{addr: o.HTTPAddr, g: g}
	return cfg, g, nil
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", addr)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// Members implements Membership: the nodes memberlist counts alive (or suspect: they
// may still answer, and the read path bypasses them if not), with their HTTP address.
func (g *Gossip) Members() ([]Member, uint64) {
	gen := g.note.generation()
	var out []Member
	for _, n := range g.ml.Members() {
		if len(n.Meta) == 0 {
			continue // a node still joining has not sent its address yet
		}
		out = append(out, Member{Name: n.Name, Addr: string(n.Meta)})
	}
	return out, gen
}

// MemberStates implements StateReporter: the members, then the nodes that died or
// left since this node joined, unless they came back. A member is StateAlive even
// while memberlist suspects it: memberlist (v0.7) keeps suspicion to itself.
func (g *Gossip) MemberStates() []MemberState {
	var out []MemberState
	for _, n := range g.ml.Members() {
		out = append(out, MemberState{Member: Member{Name: n.Name, Addr: string(n.Meta)}, State: StateAlive})
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.gone {
		out = append(out, m)
	}
	return out
}

// Changed returns a channel closed at the next change of the members.
func (g *Gossip) Changed() <-chan struct{} { return g.note.changed() }

// LocalName is this node's name in the cluster.
func (g *Gossip) LocalName() string { return g.ml.LocalNode().Name }

// Port is the port memberlist listens on (the one picked when Bind's port was 0).
func (g *Gossip) Port() int { return int(g.ml.LocalNode().Port) }

// Leave tells the others this node is going and waits up to timeout for it to spread.
// Each member is first sent a leaving notice, so it reports this node left, not dead:
// memberlist's leave event does not say which. The notices go out at once and get
// half the timeout: a member that is down must not hold up the leave.
func (g *Gossip) Leave(timeout time.Duration) error {
	self := g.ml.LocalNode().Name
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range g.ml.Members() {
		if n.Name == self {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Best effort: a member that misses it reports this node dead.
			_ = g.ml.SendReliable(n, append([]byte(leavingNotice), self...))
		}()
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout / 2):
	}
	return g.ml.Leave(timeout)
}

// Shutdown stops memberlist without telling the others (they detect the failure).
func (g *Gossip) Shutdown() error { return g.ml.Shutdown() }

// NotifyJoin implements memberlist.EventDelegate.
func (g *Gossip) NotifyJoin(n *memberlist.Node) {
	g.log.Info("peer joined", "node", n.Name, "addr", string(n.Meta))
	g.mu.Lock()
	delete(g.gone, n.Name)
	delete(g.leaving, n.Name)
	g.mu.Unlock()
	g.note.bump()
}

// NotifyLeave implements memberlist.EventDelegate (a left or failed node).
func (g *Gossip) NotifyLeave(n *memberlist.Node) {
	g.log.Info("peer left", "node", n.Name)
	g.mu.Lock()
	st := StateDead
	if g.leaving[n.Name] {
		st = StateLeft
	}
	delete(g.leaving, n.Name)
	g.gone[n.Name] = MemberState{Member: Member{Name: n.Name, Addr: string(n.Meta)}, State: st}
	g.mu.Unlock()
	g.note.bump()
}

// NotifyUpdate implements memberlist.EventDelegate.
func (g *Gossip) NotifyUpdate(n *memberlist.Node) { g.note.bump() }

// leavingNotice starts the message a leaving node sends each member, followed by its
// name. Messages are authenticated by the gossip key, as all of memberlist's traffic.
const leavingNotice = "playhead-leaving\x00"

// gossipDelegate carries the node's HTTP address as its metadata, and receives the
// leaving notices.
type gossipDelegate struct {
	addr string
	g    *Gossip
}

func (d *gossipDelegate) NodeMeta(limit int) []byte {
	if len(d.addr) > limit {
		return nil
	}
	return []byte(d.addr)
}

// NotifyMsg records a leaving notice; the names it holds are cleared at the node's
// leave or join, so they stay bounded by the members.
func (d *gossipDelegate) NotifyMsg(msg []byte) {
	name, ok := strings.CutPrefix(string(msg), leavingNotice)
	if !ok || name == "" {
		return
	}
	d.g.mu.Lock()
	defer d.g.mu.Unlock()
	d.g.leaving[name] = true
}

func (*gossipDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (*gossipDelegate) LocalState(join bool) []byte                { return nil }
func (*gossipDelegate) MergeRemoteState(buf []byte, join bool)     {}
