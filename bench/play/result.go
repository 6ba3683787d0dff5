package play

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/playhead/playhead/internal/units"
)

// Result is what a viewer would have seen. In JSON (the CLI's --json) durations are
// seconds as floating-point numbers, under the names given in the field comments.
type Result struct {
	Startup     time.Duration // startup_s: the first read's latency, before anything plays
	Freezes     int           // freezes: reads that completed more than FreezeThreshold late
	FrozenTotal time.Duration // frozen_total_s: the sum of those reads' lateness
	WorstStall  time.Duration // worst_stall_s: the latest of them
	ReadP50     time.Duration // read_p50_s: median read latency (issue to completion)
	ReadP99     time.Duration // read_p99_s: 99th percentile read latency (nearest rank)
	Bytes       int64         // bytes: bytes played
	Elapsed     time.Duration // elapsed_s: from the first read's issue to the last's completion
	Samples     []Sample      // samples: every read, in order
}

// Sample is one read, for plots.
type Sample struct {
	Off     int64         // off: the read's offset
	At      time.Duration // at_s: when it completed, since Run started
	Latency time.Duration // latency_s: issue to completion
	// Late (late_s) is completion minus the time its chunk was due: negative is slack,
	// the margin by which the read beat the playhead. Zero for the first read, which
	// defines the timeline.
	Late   time.Duration
	Freeze bool // freeze: Late exceeded FreezeThreshold (and the timeline shifted by it)
}

// Print writes the result as a short human-readable table.
func (r Result) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "startup\t%s\n", fmtDuration(r.Startup))
	fmt.Fprintf(tw, "freezes\t%d\n", r.Freezes)
	fmt.Fprintf(tw, "frozen total\t%s\n", fmtDuration(r.FrozenTotal))
	fmt.Fprintf(tw, "worst stall\t%s\n", fmtDuration(r.WorstStall))
	fmt.Fprintf(tw, "read latency\tp50 %s, p99 %s (%d reads)\n", fmtDuration(r.ReadP50), fmtDuration(r.ReadP99), len(r.Samples))
	rate := ""
	if r.Elapsed > 0 {
		rate = fmt.Sprintf(" (%s)", units.FormatRate(float64(r.Bytes)/r.Elapsed.Seconds()))
	}
	fmt.Fprintf(tw, "played\t%s in %s%s\n", units.FormatBytes(r.Bytes), fmtDuration(r.Elapsed), rate)
	return tw.Flush()
}

// fmtDuration rounds to what a reader of the table cares about: 0.1 ms under a second,
// milliseconds above.
func fmtDuration(d time.Duration) string {
	if d < time.Second {
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// resultJSON and sampleJSON are the JSON shapes; see the field comments of Result.
type resultJSON struct {
	Startup     float64      `json:"startup_s"`
	Freezes     int          `json:"freezes"`
	FrozenTotal float64      `json:"frozen_total_s"`
	WorstStall  float64      `json:"worst_stall_s"`
	ReadP50     float64      `json:"read_p50_s"`
	ReadP99     float64      `json:"read_p99_s"`
	Bytes       int64        `json:"bytes"`
	Elapsed     float64      `json:"elapsed_s"`
	Samples     []sampleJSON `json:"samples"`
}

type sampleJSON struct {
	Off     int64   `json:"off"`
	At      float64 `json:"at_s"`
	Latency float64 `json:"latency_s"`
	Late    float64 `json:"late_s"`
	Freeze  bool    `json:"freeze,omitempty"`
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// duration converts seconds back, rounding to the nanosecond so a round trip is exact.
func duration(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}

// MarshalJSON writes durations as seconds.
func (r Result) MarshalJSON() ([]byte, error) {
	j := resultJSON{
		Startup:     seconds(r.Startup),
		Freezes:     r.Freezes,
		FrozenTotal: seconds(r.FrozenTotal),
		WorstStall:  seconds(r.WorstStall),
		ReadP50:     seconds(r.ReadP50),
		ReadP99:     seconds(r.ReadP99),
		Bytes:       r.Bytes,
		Elapsed:     seconds(r.Elapsed),
		Samples:     make([]sampleJSON, len(r.Samples)),
	}
	for i, s := range r.Samples {
		j.Samples[i] = sampleJSON{Off: s.Off, At: seconds(s.At), Latency: seconds(s.Latency), Late: seconds(s.Late), Freeze: s.Freeze}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote, so saved runs can be compared later.
func (r *Result) UnmarshalJSON(b []byte) error {
	var j resultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Result{
		Startup:     duration(j.Startup),
		Freezes:     j.Freezes,
		FrozenTotal: duration(j.FrozenTotal),
		WorstStall:  duration(j.WorstStall),
		ReadP50:     duration(j.ReadP50),
		ReadP99:     duration(j.ReadP99),
		Bytes:       j.Bytes,
		Elapsed:     duration(j.Elapsed),
	}
	if j.Samples != nil {
		r.Samples = make([]Sample, len(j.Samples))
		for i, s := range j.Samples {
			r.Samples[i] = Sample{Off: s.Off, At: duration(s.At), Latency: duration(s.Latency), Late: duration(s.Late), Freeze: s.Freeze}
		}
	}
	return nil
}
