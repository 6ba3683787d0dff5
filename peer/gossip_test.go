package peer

import (
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"
)

// Bounds of the gossip test, generous for -race on a loaded two-core machine, where
// memberlist's timers run late: a failed node is dropped in 2 to 4 s here (logged).
const (
	joinLimit = 30 * time.Second
	dropLimit = 20 * time.Second
)

// Three nodes join; one shuts down without leaving; the others drop it within a few
// seconds and report it dead; one that leaves is reported left.
func TestGossipDropsFailedNode(t *testing.T) {
	s, _ := NewSecret([]byte("gossip-test-secret-0123"))
	log := slog.New(slog.DiscardHandler)
	var nodes []*Gossip
	for i := 0; i < 3; i++ {
		o := GossipOptions{Name: string(rune('a' + i)), Bind: "127.0.0.1:0", HTTPAddr: "127.0.0.1:1", Secret: s, Logger: log}
		if i > 0 {
			o.Seeds = []string{"127.0.0.1:" + itoa(nodes[0].Port())}
		}
		g, err := JoinGossip(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Shutdown() })
		nodes = append(nodes, g)
	}
	names := func(g *Gossip) []string {
		ms, _ := g.Members()
		var out []string
		for _, m := range ms {
			out = append(out, m.Name)
		}
		slices.Sort(out)
		return out
	}
	waitFor(t, joinLimit, func() bool { return len(names(nodes[2])) == 3 && len(names(nodes[0])) == 3 })
	changed := nodes[0].Changed()
	start := time.Now()
	nodes[2].Shutdown()
	waitFor(t, dropLimit, func() bool {
		return slices.Equal(names(nodes[0]), []string{"a", "b"}) && slices.Equal(names(nodes[1]), []string{"a", "b"})
	})
	t.Logf("failed node dropped after %v", time.Since(start).Round(10*time.Millisecond))
	select {
	case <-changed:
	default:
		t.Error("no change notified")
	}
	// The failed node is remembered as dead; one that leaves, as left.
	states := func(g *Gossip) map[string]string {
		out := map[string]string{}
		for _, m := range g.MemberStates() {
			out[m.Name] = m.State
		}
		return out
	}
	if st := states(nodes[0]); st["a"] != StateAlive || st["b"] != StateAlive || st["c"] != StateDead {
		t.Errorf("states after c failed: %v, want a and b alive, c dead", st)
	}
	if err := nodes[1].Leave(joinLimit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, dropLimit, func() bool { return states(nodes[0])["b"] == StateLeft })
}

func itoa(n int) string { return strconv.Itoa(n) }

func waitFor(t *testing.T, limit time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
