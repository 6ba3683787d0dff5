package report

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/playhead/playhead/bench/scenario"
)

// Print writes the header, the playback and cost tables (median over trials, with
// [min–max] when trials differ), the scenario-specific figures, and every failure.
func Print(w io.Writer, r *Report) error {
	h := r.Header
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "date\t%s\n", h.Date.Format(time.RFC3339))
	fmt.Fprintf(tw, "binary\t%s\n", h.Version)
	if h.Freshness != "" {
		fmt.Fprintf(tw, "freshness\t%s\n", h.Freshness)
	}
	fmt.Fprintf(tw, "link\t%s (%s)\n", h.Link, h.LinkOptions)
	fmt.Fprintf(tw, "link probe\trtt %s (new connection %s), %s\n", fmtDur(h.ProbeRTT), fmtDur(h.ProbeConnect),
		fmtScaled(h.ProbeThroughput, scenario.Rate))
	fmt.Fprintf(tw, "machine\t%d CPUs, %s memory, Linux %s\n", h.CPUs, fmtScaled(float64(h.MemBytes), scenario.Bytes), h.Kernel)
	mode := "full"
	if h.Quick {
		mode = "quick (sizes about 10x smaller)"
	}
	fmt.Fprintf(tw, "run\t%d trial(s) per case, %s; scenarios %s\n", h.Trials, mode, strings.Join(h.Scenarios, ", "))
	fmt.Fprintf(tw, "page cache\t%s\n", h.PageCache)
	fmt.Fprintf(tw, "mount warm-up\t%s after the mount answers (the HTTP source's spare connections)\n", fmtDur(h.Warm))
	if h.Origin != "" {
		fmt.Fprintf(tw, "origin\t%s\n", h.Origin)
	}
	for _, s := range h.Systems {
		line := s.Name
		if s.Kind == KindCeiling {
			line += " (ceiling)"
		}
		if s.Version != "" {
			line += ": " + s.Version
		}
		fmt.Fprintf(tw, "system\t%s\n", line)
		if s.Command != "" {
			fmt.Fprintf(tw, "\t  %s\n", s.Command)
		}
		if s.Note != "" {
			fmt.Fprintf(tw, "\t  %s\n", s.Note)
		}
		if s.Unavailable != "" {
			fmt.Fprintf(tw, "\t  CANNOT RUN: %s\n", s.Unavailable)
		}
	}
	for _, n := range h.Notes {
		fmt.Fprintf(tw, "note\t%s\n", n)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	multi := h.Trials > 1
	if multi {
		fmt.Fprintf(w, "\nmedian over trials [min–max]\n")
	}
	if len(h.Systems) > 1 {
		if err := comparison(w, r, multi); err != nil {
			return err
		}
		return failures(w, r.Cases)
	}
	fmt.Fprintln(w)
	if err := table(w, r.Cases, scenario.PlaybackDefs, multi); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := table(w, r.Cases, scenario.CostDefs, multi); err != nil {
		return err
	}
	if err := extras(w, r.Cases, multi); err != nil {
		return err
	}
	return failures(w, r.Cases)
}

// table prints one row per case and one column per figure of defs.
func table(w io.Writer, cases []CaseResult, defs []scenario.Def, multi bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var head strings.Builder
	head.WriteString("case\t")
	for _, d := range defs {
		head.WriteString(d.Label + "\t")
	}
	fmt.Fprintln(tw, head.String())
	for _, c := range cases {
		row := c.Name + "\t"
		switch ok := c.OK(); {
		case c.Skipped != "":
			row += "cannot run (see below)\t"
		case len(ok) == 0:
			row += "failed (see below)\t"
		default:
			for _, d := range defs {
				row += cell(c.Aggregate(d.Key), d.Unit, multi) + "\t"
			}
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// extras prints the scenario-specific figures of every case that has them.
func extras(w io.Writer, cases []CaseResult, multi bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	printed := false
	for _, c := range cases {
		for _, d := range scenario.ExtraDefs {
			st := c.Aggregate(d.Key)
			if st.N == 0 {
				continue
			}
			if !printed {
				fmt.Fprintln(w)
				printed = true
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, d.Label, cell(st, d.Unit, multi))
		}
	}
	return tw.Flush()
}

// failures lists cases that could not run and trials that failed, with their reasons.
func failures(w io.Writer, cases []CaseResult) error {
	first := true
	say := func(format string, args ...any) {
		if first {
			fmt.Fprintln(w, "\nFAILURES")
			first = false
		}
		fmt.Fprintf(w, format, args...)
	}
	for _, c := range cases {
		name := c.Name
		if c.System != "" {
			name += " [" + c.System + "]"
		}
		if c.Skipped != "" {
			say("%s: cannot run: %s\n", name, c.Skipped)
		}
		for _, t := range c.Trials {
			if t.Error != "" {
				say("%s, trial %d: %s\n", name, t.Trial, t.Error)
			}
		}
	}
	return nil
}

// cell prints a statistic: "-" when not measured, the median, and its range in the same
// scale when several trials disagree.
func cell(st Stat, u scenario.Unit, multi bool) string {
	if st.N == 0 {
		return "-"
	}
	div, suffix, prec := scale(st.Median, u)
	num := func(v float64) string { return strconv.FormatFloat(v/div, 'f', prec, 64) }
	s := num(st.Median)
	if multi && st.N > 1 && num(st.Min) != num(st.Max) {
		s += " [" + num(st.Min) + "–" + num(st.Max) + "]"
	}
	return s + suffix
}

// fmtScaled prints one value in its unit.
func fmtScaled(v float64, u scenario.Unit) string {
	return cell(Stat{Median: v, Min: v, Max: v, N: 1}, u, false)
}

func fmtDur(seconds float64) string { return fmtScaled(seconds, scenario.Seconds) }

// scale picks the divisor, suffix and decimals that print v in unit u with about three
// significant digits.
func scale(v float64, u scenario.Unit) (div float64, suffix string, prec int) {
	a := math.Abs(v)
	switch u {
	case scenario.Seconds:
		switch {
		case a == 0:
			return 1, "", 0
		case a < 0.01:
			return 1e-3, "ms", 1
		case a < 1:
			return 1e-3, "ms", 0
		case a < 100:
			return 1, "s", 2
		default:
			return 1, "s", 0
		}
	case scenario.Count:
		if a == math.Trunc(a) {
			return 1, "", 0
		}
		return 1, "", 1
	case scenario.Ratio:
		return 1, "x", 2
	case scenario.Bytes, scenario.Rate:
		suffixes := []string{"B", "kB", "MB", "GB", "TB"}
		i := 0
		div = 1
		for a/div >= 1000 && i < len(suffixes)-1 {
			div *= 1000
			i++
		}
		suffix = " " + suffixes[i]
		if u == scenario.Rate {
			suffix += "/s"
		}
		switch x := a / div; {
		case i == 0 || x >= 100:
			prec = 0
		case x >= 10:
			prec = 1
		default:
			prec = 2
		}
		return div, suffix, prec
	}
	return 1, "", 2
}
