package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/playhead/playhead/bench/scenario"
)

// TestComparisonMarksTheBetterSystemUnderTest: the lower startup and the higher
// throughput win among systems under test; a ceiling that beats both is not marked; a
// tie as printed marks both; a not-applicable ceiling is "-" with its reason.
func TestComparisonMarksTheBetterSystemUnderTest(t *testing.T) {
	trial := func(startup, rate, freezes float64) []Trial {
		return []Trial{{Trial: 1, Figures: scenario.Figures{scenario.FigStartup: startup, scenario.FigThroughput: rate,
			scenario.FigFreezes: freezes}}}
	}
	r := &Report{
		Header: Header{Trials: 1, Systems: []System{{Name: "ph", Kind: KindSUT}, {Name: "rc", Kind: KindSUT},
			{Name: "wire", Kind: KindCeiling}, {Name: "par", Kind: KindCeiling}}},
		Cases: []CaseResult{
			{Name: "play 3MB/s", System: "ph", Trials: trial(0.2, 3e6, 0)},
			{Name: "play 3MB/s", System: "rc", Trials: trial(0.5, 2.9e6, 0)},
			{Name: "play 3MB/s", System: "wire", Trials: trial(0.1, 3.1e6, 0)},
			{Name: "play 3MB/s", System: "par", NotApplicable: "players need one connection"},
		},
	}
	var out bytes.Buffer
	if err := Print(&out, r); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Log("\n" + text)
	row := func(label string) string {
		for line := range strings.SplitSeq(text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), label) {
				return line
			}
		}
		t.Fatalf("no row %q", label)
		return ""
	}
	for label, want := range map[string]string{
		"startup":    "200ms *     500ms      100ms    -",
		"throughput": "3.00 MB/s *  2.90 MB/s   3.10 MB/s    -",
		"freezes":    "0          0          0    -", // a tie among all: nothing to mark
	} {
		if got := row(label); !strings.Contains(strings.Join(strings.Fields(got), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("%s row %q, want %q", label, got, want)
		}
	}
	if !strings.Contains(text, "par: - in play 3MB/s: players need one connection") {
		t.Error("the legend does not give the ceiling's reason")
	}
}
