package peer

import (
	"sync"
)

// Membership is what the Source needs of the cluster: the live members now (this node
// included) and a generation that changes whenever they do, so the Source rebuilds its
// ring only on a change. Gossip and Static implement it.
type Membership interface {
	Members() (members []Member, gen uint64)
}

// notifier is a broadcast of "the members changed": Changed returns a channel that is
// closed at the next change. Safe for concurrent use.
type notifier struct {
	mu  sync.Mutex
	gen uint64        // guarded by mu
	ch  chan struct{} // closed at the next change; guarded by mu
}

func newNotifier() *notifier { return &notifier{ch: make(chan struct{})} }

// bump records a change and wakes every waiter.
func (n *notifier) bump() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.gen++
	close(n.ch)
	n.ch = make(chan struct{})
}

func (n *notifier) changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

func (n *notifier) generation() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.gen
}

// Static is a fixed list of members (--peers): no gossip, no failure detection. A member
// that is down is found by the read path instead (its requests fail or pass the hedge
// threshold, and go to the origin), which costs a little time per run but never a read.
type Static struct {
	members []Member
}

// NewStatic returns the membership of self and peers. Each member's name is its peer
// HTTP address, so every node must spell each address the same way (self's as the
// others list it). self may also be in peers.
func NewStatic(self string, peers []string) *Static {
	seen := map[string]bool{}
	var ms []Member
	for _, a := range append([]string{self}, peers...) {
		if a == "" || seen[a] {
			continue
		}
		seen[a] = true
		ms = append(ms, Member{Name: a, Addr: a})
	}
	return &Static{members: ms}
}

// Members implements Membership; the generation never changes.
func (s *Static) Members() ([]Member, uint64) { return s.members, 0 }
