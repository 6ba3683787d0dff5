// Package cluster runs a peer-tier cluster of `playhead mount` processes on one machine,
// for integration tests and the bench's cluster scenario (issue 16). Every node is a
// separate daemon with its own cache directory, mountpoint and log file; node i gossips
// on 127.0.0.(10+i), so the nodes are told apart by address as on a real network. Node 0
// starts the cluster and the others --join it; one shared secret file serves them all.
//
// Design notes and traps:
//   - Readiness is observed, not slept for: a node is up when a stat of Options.ReadyFile
//     through its mount succeeds, and the cluster has converged when every running
//     node's log names exactly the running nodes as members (memberlist's "peer joined"
//     and "peer left" lines, logged at info, self included).
//   - A daemon gets its own process group and SIGTERM when this process dies, so an
//     aborted test still unmounts; Kill leaves a dead FUSE mount, which it detaches
//     (fusermount3 -uz) before returning, and Close detaches whatever is left: no test
//     leaves a stale mount behind, even as root.
//   - A node keeps its addresses across Restart: memberlist then sees the same node come
//     back, and the others' rings give it the same stripes, so its old cache is used again.
//   - Ports are probed free just before a daemon starts; another process may take one in
//     between, and the daemon then fails to start with an error that says so.
package cluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Options configure a Cluster.
type Options struct {
	// Exe is the playhead binary. Required.
	Exe string
	// Source is the SOURCE every node mounts (an origin URL). Required.
	Source string
	// Nodes is how many daemons to run. Required, 1 to maxNodes.
	Nodes int
	// Dir holds the secret, and each node's cache, mountpoint and log. Required; it must
	// exist. Close does not remove it (the caller's temporary directory does).
	Dir string
	// ReadyFile is a path of the source (slash-separated) whose stat through a mount
	// proves the mount answers. Required.
	ReadyFile string
	// Args are extra `mount` flags every node gets (--cache-size, --read-ahead...).
	Args []string
	// ReadyTimeout bounds the wait for a mount to answer. Zero means
	// DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// ConvergeTimeout bounds the wait for the membership to converge. Zero means
	// DefaultConvergeTimeout.
	ConvergeTimeout time.Duration
}

// DefaultReadyTimeout is Options.ReadyTimeout's default: a mount answers in a few round
// trips; one that needs more is broken.
const DefaultReadyTimeout = 30 * time.Second

// DefaultConvergeTimeout is Options.ConvergeTimeout's default. Gossip usually converges
// in about a second, but a member that missed a join learns of it only at its next full
// state exchange (every 5 s, package peer's pushPullInterval); the wait leaves room for
// several on a loaded machine.
const DefaultConvergeTimeout = 45 * time.Second

// maxNodes bounds Options.Nodes: node i uses 127.0.0.(10+i), and a static outsider
// (StartOutsider) the address after the last node's.
const maxNodes = 200

// firstHost is the last byte of node 0's loopback address.
const firstHost = 10

// secretBytes is the shared secret's length: the tier needs at least 16 bytes.
const secretBytes = 32

// Cluster is a set of running nodes. Its methods are safe for one goroutine at a time
// (a test's); reads through the mounts may run concurrently with them.
type Cluster struct {
	opts       Options
	secretPath string

	mu        sync.Mutex // guards nodes and outsiders against Close from a cleanup
	nodes     []*Node
	outsiders []*Node
}

// Start starts opts.Nodes daemons and returns once every mount answers and the
// membership has converged. On an error nothing is left running.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Exe == "" || opts.Source == "" || opts.Dir == "" || opts.ReadyFile == "" {
		return nil, errors.New("cluster: Exe, Source, Dir and ReadyFile are required")
	}
	if opts.Nodes < 1 || opts.Nodes > maxNodes {
		return nil, fmt.Errorf("cluster: %d nodes: want 1 to %d", opts.Nodes, maxNodes)
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.ConvergeTimeout == 0 {
		opts.ConvergeTimeout = DefaultConvergeTimeout
	}
	c := &Cluster{opts: opts, secretPath: filepath.Join(opts.Dir, "secret")}
	if err := WriteSecret(c.secretPath); err != nil {
		return nil, err
	}
	for i := range opts.Nodes {
		n, err := c.newNode(i)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
		if err := n.start(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitConverged(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// WriteSecret writes a new random shared secret to path, readable by its owner only.
func WriteSecret(path string) error {
	b := make([]byte, secretBytes)
	rand.Read(b)
	if err := os.WriteFile(path, fmt.Appendf(nil, "%x\n", b), 0o600); err != nil {
		return fmt.Errorf("cluster: secret: %w", err)
	}
	return nil
}

// newNode prepares node i's directories and addresses.
func (c *Cluster) newNode(i int) (*Node, error) {
	host := fmt.Sprintf("127.0.0.%d", firstHost+i)
	port, err := freePortPair(host)
	if err != nil {
		return nil, err
	}
	n := &Node{Index: i, host: host, port: port, opts: c.opts}
	if err := n.makeDirs(c.opts.Dir, fmt.Sprintf("node%d", i)); err != nil {
		return nil, err
	}
	n.args = []string{"--peer-listen", n.GossipAddr(), "--peer-secret-file", c.secretPath}
	if i > 0 {
		n.args = append(n.args, "--join", c.nodes[0].GossipAddr())
	}
	return n, nil
}

// rejoinArgs are node i's peer flags for a restart: it joins a running node, as a
// restarted member of a real cluster does. Node 0 started the cluster without --join;
// restarted so, it would form a cluster of its own that the others never rejoin.
func (c *Cluster) rejoinArgs(i int) []string {
	n := c.nodes[i]
	args := []string{"--peer-listen", n.GossipAddr(), "--peer-secret-file", c.secretPath}
	for _, o := range c.nodes {
		if o.Index != i && o.Running() {
			return append(args, "--join", o.GossipAddr())
		}
	}
	return args // no other node runs: it starts the cluster again
}

// Len is the number of nodes.
func (c *Cluster) Len() int { return len(c.nodes) }

// Node returns node i.
func (c *Cluster) Node(i int) *Node { return c.nodes[i] }

// SecretPath is the shared secret's file.
func (c *Cluster) SecretPath() string { return c.secretPath }

// Kill kills node i with SIGKILL, waits for it to die and detaches its dead mount. The
// others are not told: they find out by gossip's failure detection.
func (c *Cluster) Kill(i int) error { return c.nodes[i].kill() }

// Restart starts node i again, at the same addresses and with the same cache directory,
// or an empty new one when freshCache is set, and with the extra mount flags until its
// next restart; it returns once the node's mount answers and the membership has
// converged again.
//
// It first waits until the other nodes have dropped node i: memberlist may ignore a
// node that comes back while some members are still declaring its old self dead, until
// their next full state exchange (every 5 s), so a restart inside the failure detection
// window can leave members that do not see it for that long.
func (c *Cluster) Restart(ctx context.Context, i int, freshCache bool, extra ...string) error {
	n := c.nodes[i]
	if n.Running() {
		return fmt.Errorf("cluster: node %d is running: Kill or Stop it first", i)
	}
	if err := c.WaitConverged(ctx); err != nil {
		return err
	}
	if freshCache {
		n.restarts++
		n.CacheDir = filepath.Join(c.opts.Dir, fmt.Sprintf("node%d", i), fmt.Sprintf("cache.%d", n.restarts))
		if err := os.MkdirAll(n.CacheDir, 0o755); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	n.args = append(c.rejoinArgs(i), extra...)
	if err := n.start(ctx); err != nil {
		return err
	}
	return c.WaitConverged(ctx)
}

// StartOutsider starts one more node outside the gossip: it lists every node's peer
// HTTP endpoint statically (--peers) and uses the secret in secretPath. With another
// secret than the cluster's, every request it sends a node is refused. Close stops it.
func (c *Cluster) StartOutsider(ctx context.Context, secretPath string) (*Node, error) {
	i := len(c.nodes) + len(c.outsiders)
	host := fmt.Sprintf("127.0.0.%d", firstHost+i)
	port, err := freePortPair(host)
	if err != nil {
		return nil, err
	}
	n := &Node{Index: i, host: host, port: port, opts: c.opts, outsider: true}
	if err := n.makeDirs(c.opts.Dir, fmt.Sprintf("outsider%d", i)); err != nil {
		return nil, err
	}
	var peers []string
	for _, m := range c.nodes {
		peers = append(peers, m.HTTPAddr())
	}
	n.args = []string{"--peers", strings.Join(peers, ","), "--peer-http", n.HTTPAddr(), "--peer-secret-file", secretPath}
	c.mu.Lock()
	c.outsiders = append(c.outsiders, n)
	c.mu.Unlock()
	if err := n.start(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// WaitConverged waits until every running node's log names exactly the running nodes as
// members, or Options.ConvergeTimeout passes.
func (c *Cluster) WaitConverged(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ConvergeTimeout)
	defer cancel()
	var want []string
	for _, n := range c.nodes {
		if n.Running() {
			want = append(want, n.GossipAddr())
		}
	}
	slices.Sort(want)
	for {
		lagging := ""
		for _, n := range c.nodes {
			if !n.Running() {
				continue
			}
			got, err := n.members()
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) {
				lagging = fmt.Sprintf("node %d sees %v, want %v", n.Index, got, want)
				break
			}
		}
		if lagging == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: membership not converged: %s%s", lagging, c.Logs())
		case <-time.After(pollEvery):
		}
	}
}

// pollEvery is how often readiness and membership are checked: fine enough not to
// delay a test noticeably, coarse enough not to load the daemons.
const pollEvery = 50 * time.Millisecond

// Close stops every node (SIGTERM, then SIGKILL if one does not exit in time) and
// detaches any mount left behind. It returns what went wrong; it is safe to call twice.
func (c *Cluster) Close() error {
	c.mu.Lock()
	all := append(slices.Clone(c.outsiders), c.nodes...)
	c.mu.Unlock()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, n := range all {
		wg.Go(func() { errs[i] = n.Stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// logTail is how much of each node's log Logs quotes.
const logTail = 4 << 10

// Logs returns the end of every node's log, for a failure message.
func (c *Cluster) Logs() string {
	c.mu.Lock()
	all := append(slices.Clone(c.nodes), c.outsiders...)
	c.mu.Unlock()
	var b strings.Builder
	for _, n := range all {
		data, _ := os.ReadFile(n.LogPath)
		if len(data) > logTail {
			data = data[len(data)-logTail:]
		}
		fmt.Fprintf(&b, "\n--- node %d (%s), log %s:\n%s", n.Index, n.host, n.LogPath, data)
	}
	return b.String()
}
