package memsrc_test

import (
	"testing"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/source/sourcetest"
)

// The in-memory fake keeps the contract the real backends keep (issue 14): the layers
// above are tested against it.
func TestConformance(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T) *sourcetest.Fixture {
		src := memsrc.New()
		return &sourcetest.Fixture{
			Source:   src,
			Put:      func(_ testing.TB, p string, data []byte) { src.Add(p, data) },
			Delete:   func(_ testing.TB, p string) { src.Remove(p) },
			NoDenied: "memsrc has no access control: it is an in-memory fake",
			// The fault wrapper fails the first n opens with its transient ErrInjected,
			// as an origin throttling them would, and leaves retrying to the fetcher.
			Throttled: func(_ testing.TB, n int) source.Source {
				plan := memsrc.FaultPlan{}
				for i := 1; i <= n; i++ {
					plan.Faults = append(plan.Faults, memsrc.Fault{N: i, Kind: memsrc.FailOpen})
				}
				return memsrc.WithFaults(src, plan)
			},
		}
	})
}
