package peer_test

import (
	"testing"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/source/sourcetest"
)

// peer.Source keeps the source contract: three in-process nodes over one memsrc, the
// suite reading through the first.
func TestConformance(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T) *sourcetest.Fixture {
		origin := memsrc.New()
		nodes, _ := cluster(t, origin, 3, nil)
		return &sourcetest.Fixture{
			Source:   nodes[0].src,
			Put:      func(_ testing.TB, p string, data []byte) { origin.Add(p, data) },
			Delete:   func(_ testing.TB, p string) { origin.Remove(p) },
			NoDenied: "memsrc has no access control",
			Throttled: func(t testing.TB, n int) source.Source {
				plan := memsrc.FaultPlan{}
				for i := 1; i <= n; i++ {
					plan.Faults = append(plan.Faults, memsrc.Fault{N: i, Kind: memsrc.FailOpen})
				}
				ns, _ := cluster(t, memsrc.WithFaults(origin, plan), 3, nil)
				return ns[0].src
			},
		}
	})
}
