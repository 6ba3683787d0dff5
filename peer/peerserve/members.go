package peerserve

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/playhead/playhead/peer"
)

// Tier is what the members view needs of the node's peer.Source.
type Tier interface {
	MemberStats() []peer.MemberStat
	Stats() peer.Stats
}

var _ Tier = (*peer.Source)(nil)

// MembersView is the answer of peer.MembersPath: this node's view of the cluster.
type MembersView struct {
	Self    string      `json:"self"` // this node's member name
	Members []MemberRow `json:"members"`
	Client  peer.Stats  `json:"client"` // what this node read, from peers and from the origin
	Server  Stats       `json:"server"` // what this node answered peers (401s included)
}

// MemberRow is one member: what this node read from it, and Served, the bytes this
// node served it (for this node's own row: to every peer).
type MemberRow struct {
	peer.MemberStat
	Served int64 `json:"served"`
}

// members answers the view as JSON. Only a signed request gets here: the view names
// the members' addresses, which a stranger has no business learning.
func (h *Handler) members(w http.ResponseWriter) {
	v := MembersView{Client: h.o.Tier.Stats(), Server: h.Stats(), Members: []MemberRow{}}
	for _, m := range h.o.Tier.MemberStats() {
		row := MemberRow{MemberStat: m, Served: h.byMember.load(m.Name)}
		if m.Self {
			v.Self, row.Served = m.Name, v.Server.Bytes
		}
		v.Members = append(v.Members, row)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		h.log.Debug("members view not sent", "err", err)
	}
}

// servedTable counts the bytes served to each member, by the name its requests are
// signed with. The names are bounded by the cluster's members: only a holder of the
// secret signs, and a tool signs with none (counted under "").
type servedTable struct {
	mu sync.Mutex
	by map[string]*atomic.Int64 // guarded by mu
}

func (t *servedTable) get(name string) *atomic.Int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = map[string]*atomic.Int64{}
	}
	n := t.by[name]
	if n == nil {
		n = new(atomic.Int64)
		t.by[name] = n
	}
	return n
}

func (t *servedTable) load(name string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := t.by[name]; n != nil {
		return n.Load()
	}
	return 0
}
