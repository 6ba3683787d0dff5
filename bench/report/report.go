// Package report holds the results of `playhead bench run` and prints them: a terminal
// table of medians over trials with their range, and JSON with every trial's raw figures.
//
// Design notes and traps:
//   - The report keeps every trial; medians are computed when printing, so the JSON is
//     the raw material and a later tool can aggregate differently.
//   - A case that could not run, or a trial that failed, is kept with its reason and
//     printed as such: nothing is dropped silently, and a failed trial's figures are not
//     mixed into the medians.
//   - Figures are the keys of bench/scenario; their units come from its Defs.
//   - A run may compare systems (playhead, rclone, the link's and the disk's ceilings):
//     Cases then holds one CaseResult per case and system, in Header.Systems order, and
//     Print shows each case as a block with the systems as columns. A system that does
//     not apply to a scenario by design (a ceiling with no meaning there) is recorded
//     with NotApplicable and printed as "-", with the reason in the legend; one that
//     could not run (not installed, no root) is a failure with its reason.
package report

import (
	"slices"
	"time"

	"github.com/playhead/playhead/bench/scenario"
)

// Report is one run of the benchmark.
type Report struct {
	Header Header       `json:"header"`
	Cases  []CaseResult `json:"cases"`
}

// Header describes what was measured, on what, and how.
type Header struct {
	Date      time.Time `json:"date"`
	Version   string    `json:"version"`    // the binary under test's version line
	Commit    string    `json:"commit"`     // its commit (with -dirty for a modified tree)
	BuildTime string    `json:"build_time"` // when it was built (UTC, RFC 3339)
	Freshness string    `json:"freshness"`  // how the binary compares with the source tree

	Link            string  `json:"link"`         // profile name
	LinkOptions     string  `json:"link_options"` // what the profile emulates
	ProbeRTT        float64 `json:"probe_rtt_s"`  // measured through the link before the run
	ProbeConnect    float64 `json:"probe_connect_s"`
	ProbeThroughput float64 `json:"probe_throughput_Bps"`

	CPUs     int    `json:"cpus"`
	MemBytes int64  `json:"mem_bytes"`
	Kernel   string `json:"kernel"`

	Trials    int      `json:"trials"`
	Quick     bool     `json:"quick"`
	Scenarios []string `json:"scenarios"`
	// PageCache says whether the page cache was dropped before each scenario (root only).
	PageCache string   `json:"page_cache"`
	Warm      float64  `json:"warm_s"` // wait after a mount is ready, for its connections
	Notes     []string `json:"notes,omitempty"`

	// Origin is the HTTP server behind the link: "builtin" or "nginx", with its version.
	Origin string `json:"origin,omitempty"`
	// Systems are the columns of a comparison, in order; empty for a run of playhead
	// alone (older reports).
	Systems []System `json:"systems,omitempty"`
}

// Kinds of System.
const (
	KindSUT     = "sut"     // a system under test: compared, the better value marked
	KindCeiling = "ceiling" // a limit to read the others against (link, disk): not marked
)

// System is one column of a comparison.
type System struct {
	Name    string `json:"name"`              // column label
	Kind    string `json:"kind"`              // KindSUT or KindCeiling
	Version string `json:"version,omitempty"` // e.g. "rclone v1.60.1-DEV"
	Command string `json:"command,omitempty"` // how it is mounted or what it does
	Note    string `json:"note,omitempty"`    // what a reader of its figures should know
	// Unavailable is why it could not run at all (every case then says so).
	Unavailable string `json:"unavailable,omitempty"`
}

// CaseResult is one case's trials on one system.
type CaseResult struct {
	Scenario string  `json:"scenario"`
	Name     string  `json:"name"`
	System   string  `json:"system,omitempty"` // a Header.Systems name; empty: playhead alone
	Trials   []Trial `json:"trials"`
	// Skipped is why the case did not run at all (empty when it ran).
	Skipped string `json:"skipped,omitempty"`
	// NotApplicable is why the system has no figures for this case by design (a
	// ceiling that means nothing there); it is not a failure.
	NotApplicable string `json:"not_applicable,omitempty"`
}

// Trial is one trial's figures, or why it failed.
type Trial struct {
	Trial   int              `json:"trial"`
	Figures scenario.Figures `json:"figures,omitempty"`
	Error   string           `json:"error,omitempty"`
	Elapsed float64          `json:"elapsed_s"` // wall time of the trial, mounts included
	// Reads are the trial's timed reads (see scenario.Read), for plots.
	Reads []scenario.Read `json:"reads,omitempty"`
}

// OK returns the trials that succeeded.
func (c CaseResult) OK() []Trial {
	var ok []Trial
	for _, t := range c.Trials {
		if t.Error == "" {
			ok = append(ok, t)
		}
	}
	return ok
}

// Failed reports whether the case did not run or any trial failed.
func (c CaseResult) Failed() bool {
	return c.Skipped != "" || len(c.OK()) < len(c.Trials)
}

// Stat is a figure over trials: median, min and max, over N trials that have it.
type Stat struct {
	Median, Min, Max float64
	N                int
}

// Aggregate returns the statistics of figure key over the successful trials; N is 0
// when none has it.
func (c CaseResult) Aggregate(key string) Stat {
	var vs []float64
	for _, t := range c.OK() {
		if v, ok := t.Figures[key]; ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return Stat{}
	}
	slices.Sort(vs)
	med := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return Stat{Median: med, Min: vs[0], Max: vs[len(vs)-1], N: len(vs)}
}
