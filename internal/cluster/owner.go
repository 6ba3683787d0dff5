package cluster

import (
	"fmt"
	"time"

	"github.com/playhead/playhead/peer"
	"github.com/playhead/playhead/source"
)

// Owner returns the index of the running node that owns the stripe at off of the
// object at path (size bytes, modified at mtime, as a listing reports it), by the ring
// every node computes: rendezvous over the running nodes' names, keyed by the source
// ID, the path, the size-mtime version and the stripe. A benchmark uses it to pick data
// a node reads from its peers only; it holds while the nodes use peer's default block
// and stripe sizes (the mount sets the block size; the harness passes no other).
func (c *Cluster) Owner(path string, size int64, mtime time.Time, off int64) (int, error) {
	secret, err := peer.LoadSecret(c.secretPath)
	if err != nil {
		return 0, fmt.Errorf("cluster: %w", err)
	}
	var members []peer.Member
	byName := map[string]int{}
	for _, n := range c.nodes {
		if n.Running() {
			members = append(members, peer.Member{Name: n.GossipAddr(), Addr: n.HTTPAddr()})
			byName[n.GossipAddr()] = n.Index
		}
	}
	o := peer.DefaultOptions()
	key := peer.BlockKey{
		Source:  secret.SourceID(c.opts.Source),
		Path:    path,
		Version: source.Version{Size: size, ModTime: mtime}.CacheKey(),
		Stripe:  off / (o.BlockSize * o.StripeBlocks),
	}
	m, ok := peer.NewRing(members).Owner(key)
	if !ok {
		return 0, fmt.Errorf("cluster: no node is running")
	}
	return byName[m.Name], nil
}

// StripeSize is the unit of ownership Owner assumes, in bytes.
func StripeSize() int64 {
	o := peer.DefaultOptions()
	return o.BlockSize * o.StripeBlocks
}
