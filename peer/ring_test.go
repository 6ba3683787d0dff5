package peer

import (
	"fmt"
	"testing"
)

// Adding a node moves only its share of the keys, and none between the old nodes.
func TestRingAddMovesOnlyNewShare(t *testing.T) {
	const keys = 10000
	for _, n := range []int{1, 3, 7} {
		var ms []Member
		for i := 0; i < n; i++ {
			ms = append(ms, Member{Name: fmt.Sprintf("10.0.0.%d:7947", i+1)})
		}
		before := NewRing(ms)
		added := Member{Name: "10.0.0.99:7947"}
		after := NewRing(append(ms, added))
		moved := 0
		for i := 0; i < keys; i++ {
			k := BlockKey{Source: "src", Path: fmt.Sprintf("dir/file%d.bin", i%97), Version: "1-2", Stripe: int64(i)}
			a, _ := before.Owner(k)
			b, _ := after.Owner(k)
			if a.Name == b.Name {
				continue
			}
			if b.Name != added.Name {
				t.Fatalf("n=%d: key %v moved from %s to %s, an old node", n, k, a.Name, b.Name)
			}
			moved++
		}
		share := float64(keys) / float64(n+1)
		if f := float64(moved); f < 0.85*share || f > 1.15*share {
			t.Errorf("n=%d→%d: %d of %d keys moved, want about %.0f", n, n+1, moved, keys, share)
		}
	}
}

// The ring does not depend on the order members are listed in.
func TestRingOrderFree(t *testing.T) {
	a := NewRing([]Member{{Name: "a"}, {Name: "b"}, {Name: "c"}})
	b := NewRing([]Member{{Name: "c"}, {Name: "a"}, {Name: "b"}, {Name: "a"}})
	for i := int64(0); i < 1000; i++ {
		k := BlockKey{Source: "s", Path: "p", Version: "v", Stripe: i}
		x, _ := a.Owner(k)
		y, _ := b.Owner(k)
		if x != y {
			t.Fatalf("stripe %d: owner %s in one order, %s in another", i, x.Name, y.Name)
		}
	}
	if _, ok := NewRing(nil).Owner(BlockKey{}); ok {
		t.Error("an empty ring named an owner")
	}
}
