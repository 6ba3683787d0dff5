package report

import (
	"testing"

	"github.com/playhead/playhead/bench/scenario"
)

func TestAggregateSkipsFailedTrials(t *testing.T) {
	c := CaseResult{Trials: []Trial{
		{Figures: scenario.Figures{"x": 3}},
		{Figures: scenario.Figures{"x": 1}},
		{Figures: scenario.Figures{"x": 100}, Error: "broken"},
		{Figures: scenario.Figures{"x": 2}},
		{Figures: scenario.Figures{"x": 10}},
	}}
	if got := c.Aggregate("x"); got != (Stat{Median: 2.5, Min: 1, Max: 10, N: 4}) {
		t.Errorf("Aggregate = %+v", got)
	}
	if !c.Failed() || c.Aggregate("y").N != 0 {
		t.Error("a failed trial or a missing figure is not reported")
	}
}

func TestCell(t *testing.T) {
	for _, tc := range []struct {
		st   Stat
		u    scenario.Unit
		want string
	}{
		{Stat{}, scenario.Seconds, "-"},
		{Stat{Median: 0.2213, Min: 0.2, Max: 0.25, N: 3}, scenario.Seconds, "221 [200–250]ms"},
		{Stat{Median: 0.0057, Min: 0.0057, Max: 0.0057, N: 3}, scenario.Seconds, "5.7ms"},
		{Stat{Median: 1.5, Min: 1, Max: 2, N: 2}, scenario.Count, "1.5 [1.0–2.0]"},
		{Stat{Median: 20e6, Min: 20e6, Max: 20e6, N: 1}, scenario.Bytes, "20.0 MB"},
		{Stat{Median: 26.7e6, Min: 26e6, Max: 27e6, N: 5}, scenario.Rate, "26.7 [26.0–27.0] MB/s"},
		{Stat{Median: 3.7, Min: 3.7, Max: 3.7, N: 1}, scenario.Ratio, "3.70x"},
	} {
		if got := cell(tc.st, tc.u, true); got != tc.want {
			t.Errorf("cell(%+v) = %q, want %q", tc.st, got, tc.want)
		}
	}
}
