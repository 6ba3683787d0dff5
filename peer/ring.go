package peer

import (
	"slices"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
	rendezvous "github.com/dgryski/go-rendezvous"
)

// Member is one live node of the cluster.
type Member struct {
	// Name identifies the node in the ring; it must be the same on every node's view.
	Name string
	// Addr is host:port of the node's peer HTTP endpoint.
	Addr string
}

// BlockKey names one stripe of blocks of one object version in the cluster: the unit of
// ownership (Options.StripeBlocks).
type BlockKey struct {
	Source  string // the source's ID (Secret.SourceID), the same on every node
	Path    string
	Version string // versionName: the size-mtime CacheKey
	Stripe  int64  // offset / (block size × StripeBlocks)
}

// String is the key hashed by the ring. NUL cannot occur in a path or an ETag, so two
// keys never share a string.
func (k BlockKey) String() string {
	return k.Source + "\x00" + k.Path + "\x00" + k.Version + "\x00" + strconv.FormatInt(k.Stripe, 10)
}

// Ring maps block keys to their owners. A Ring is immutable: a membership change builds
// a new one, so lookups need no lock.
type Ring struct {
	members map[string]Member
	rv      *rendezvous.Rendezvous
}

// hashString is the ring's hash. It must be the same function of the same bytes on every
// node (no per-process seed, unlike hash/maphash): xxhash64, fast and well mixed.
func hashString(s string) uint64 { return xxhash.Sum64String(s) }

// NewRing builds the ring of members. Duplicate names keep the first. The order of
// members does not matter: rendezvous hashing scores each (key, node) pair alone.
func NewRing(members []Member) *Ring {
	byName := make(map[string]Member, len(members))
	names := make([]string, 0, len(members))
	for _, m := range members {
		if _, dup := byName[m.Name]; dup {
			continue
		}
		byName[m.Name] = m
		names = append(names, m.Name)
	}
	slices.Sort(names)
	// Built anew rather than with Add/Remove: the library's Remove indexes one past the
	// end of its slices in this version.
	return &Ring{members: byName, rv: rendezvous.New(names, hashString)}
}

// Owner returns the member that owns k, and false for an empty ring.
func (r *Ring) Owner(k BlockKey) (Member, bool) {
	if len(r.members) == 0 {
		return Member{}, false
	}
	m, ok := r.members[r.rv.Lookup(k.String())]
	return m, ok
}

// Len is the number of members.
func (r *Ring) Len() int { return len(r.members) }

// Members returns the members sorted by name.
func (r *Ring) Members() []Member {
	out := make([]Member, 0, len(r.members))
	for _, m := range r.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}
