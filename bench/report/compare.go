package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/playhead/playhead/bench/scenario"
)

// betterMark follows the better median among the systems under test.
const betterMark = " *"

// comparison prints one block per case: a row per figure, a column per system, the
// better value among the systems under test marked, then the legend.
func comparison(w io.Writer, r *Report, multi bool) error {
	systems := r.Header.Systems
	defs := slices.Concat(scenario.PlaybackDefs, scenario.CostDefs, scenario.ExtraDefs)
	// The table is right-aligned for the numbers; labels padded to one width read as
	// left-aligned.
	width := 0
	for _, d := range defs {
		width = max(width, utf8.RuneCountInString(d.Label))
	}
	for _, n := range caseNames(r.Cases) {
		width = max(width, utf8.RuneCountInString(n))
	}
	pad := func(s string) string { return s + strings.Repeat(" ", width-utf8.RuneCountInString(s)) }
	for _, name := range caseNames(r.Cases) {
		bySystem := map[string]CaseResult{}
		for _, c := range r.Cases {
			if c.Name == name {
				bySystem[c.System] = c
			}
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := pad(name) + "\t"
		for _, s := range systems {
			head += s.Name + "  \t"
		}
		fmt.Fprintln(tw, head)
		first := true
		for _, d := range defs {
			cells := make([]string, len(systems))
			stats := make([]Stat, len(systems))
			measured := false
			for i, s := range systems {
				c, ok := bySystem[s.Name]
				switch {
				case !ok || c.NotApplicable != "":
					cells[i] = "-"
				case c.Skipped != "":
					cells[i] = ""
					if first {
						cells[i] = "cannot run"
					}
				case len(c.OK()) == 0:
					cells[i] = ""
					if first {
						cells[i] = "failed"
					}
				default:
					stats[i] = c.Aggregate(d.Key)
					cells[i] = cell(stats[i], d.Unit, multi)
					measured = measured || stats[i].N > 0
				}
			}
			if !measured {
				continue
			}
			first = false
			marked := better(systems, stats, d)
			row := pad(d.Label) + "\t"
			for i := range systems {
				suffix := "  "
				if marked[i] {
					suffix = betterMark
				}
				row += cells[i] + suffix + "\t"
			}
			fmt.Fprintln(tw, row)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return legend(w, r)
}

// caseNames returns the case names of cases in their first order.
func caseNames(cases []CaseResult) []string {
	var names []string
	for _, c := range cases {
		if !slices.Contains(names, c.Name) {
			names = append(names, c.Name)
		}
	}
	return names
}

// better marks the systems under test whose median of d is the best, when at least two
// have one and they differ. Values are compared as printed, so a tie the table shows
// as equal is marked on both.
func better(systems []System, stats []Stat, d scenario.Def) []bool {
	marked := make([]bool, len(systems))
	if d.Better == scenario.Neither {
		return marked
	}
	var idx []int
	for i, s := range systems {
		if s.Kind == KindSUT && stats[i].N > 0 {
			idx = append(idx, i)
		}
	}
	if len(idx) < 2 {
		return marked
	}
	best := idx[0]
	for _, i := range idx[1:] {
		if (d.Better == scenario.Lower && stats[i].Median < stats[best].Median) ||
			(d.Better == scenario.Higher && stats[i].Median > stats[best].Median) {
			best = i
		}
	}
	shown := func(i int) string { return fmtScaled(stats[i].Median, d.Unit) }
	distinct := false
	for _, i := range idx {
		distinct = distinct || shown(i) != shown(best)
	}
	if !distinct {
		return marked
	}
	for _, i := range idx {
		marked[i] = shown(i) == shown(best)
	}
	return marked
}

// legend explains the marks and every "-" that is a system's, not a scenario's.
func legend(w io.Writer, r *Report) error {
	var suts []string
	for _, s := range r.Header.Systems {
		if s.Kind == KindSUT {
			suts = append(suts, s.Name)
		}
	}
	fmt.Fprintln(w, "\nlegend")
	fmt.Fprintf(w, "  *  the better median among the systems under test (%s); ceilings are not marked\n", strings.Join(suts, ", "))
	fmt.Fprintln(w, "  -  not measured: the scenario has no such figure, or (below) the system does not apply to it")
	for _, s := range r.Header.Systems {
		// Group the cases by reason, so a ceiling's reasons read as a short list.
		var reasons []string
		cases := map[string][]string{}
		for _, c := range r.Cases {
			if c.System != s.Name || c.NotApplicable == "" {
				continue
			}
			if _, ok := cases[c.NotApplicable]; !ok {
				reasons = append(reasons, c.NotApplicable)
			}
			cases[c.NotApplicable] = append(cases[c.NotApplicable], c.Name)
		}
		for _, why := range reasons {
			fmt.Fprintf(w, "  %s: - in %s: %s\n", s.Name, strings.Join(cases[why], ", "), why)
		}
	}
	return nil
}
