package scenario

import (
	"io/fs"
	"time"

	"github.com/playhead/playhead/bench/play"
)

// Read is one timed read of a trial, for plots of read latency over time.
type Read struct {
	At      float64 `json:"t"`                // completion, seconds since the scenario began reading
	Latency float64 `json:"lat"`              // issue to completion, seconds
	Freeze  bool    `json:"freeze,omitempty"` // a paced read that completed too late
	// Player numbers the reader from 1 when a case runs several at once (streams), 0
	// otherwise; Off is the read's offset in its file. Together they give each player's
	// timeline, to line a freeze up with the connection that carried its bytes.
	Player int   `json:"player,omitempty"`
	Off    int64 `json:"off"`
}

// ReadRecorder is implemented by an Env that keeps each trial's reads (the runner's).
// A scenario records once, at the end of its trial; the reads it records are the ones
// its figures describe (rewatch: the second play).
type ReadRecorder interface {
	RecordReads([]Read)
}

// record hands reads to env if it keeps them.
func record(env Env, reads []Read) {
	if r, ok := env.(ReadRecorder); ok {
		r.RecordReads(reads)
	}
}

// playReads converts a play's samples, shifted by offset (when the play began relative
// to the scenario's start), as player's reads (0: the case's only reader).
func playReads(res play.Result, offset time.Duration, player int) []Read {
	reads := make([]Read, 0, len(res.Samples))
	for _, s := range res.Samples {
		reads = append(reads, Read{At: (offset + s.At).Seconds(), Latency: s.Latency.Seconds(), Freeze: s.Freeze,
			Player: player, Off: s.Off})
	}
	return reads
}

// Uncached is implemented by a mounted fs.FS that keeps nothing between reads (a plain
// HTTP client standing for the link's limit). bulk skips its second, "cached" read on
// such a file system: it would only download the file again.
type Uncached interface {
	fs.FS
	Uncached()
}
