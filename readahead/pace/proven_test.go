package pace

import (
	"testing"
	"time"

	"github.com/playhead/playhead/readahead"
)

// A demuxer that reads a few megabytes as fast as they arrive, after a seek, reads as
// a fast player: its lead must stay within provenAhead times what it consumed (beyond
// its window), so it costs about three times what it read when it stops.
func TestClaimBoundsTheLeadByConsumption(t *testing.T) {
	const bs = 256 << 10
	cfg := readahead.DefaultConfig()
	pol := readahead.New(cfg, 1<<30)
	var run Run
	scanned := int64(0)
	off := int64(100 << 20)
	// FFmpeg after -ss: a 36 KiB read at the target, then 256 KiB reads every 10 ms
	// once the first data came, a round trip later (25 MB/s).
	at := []time.Duration{0}
	lens := []int64{36 << 10}
	for i := 0; i < 11; i++ {
		at = append(at, 200*time.Millisecond+time.Duration(i)*10*time.Millisecond)
		lens = append(lens, bs)
	}
	for i, d := range at {
		dec := pol.Read(off, lens[i])
		now := epoch.Add(d)
		p := Claim(Read{Dec: dec, Policy: true, First: off / bs, End: (off + lens[i] + bs - 1) / bs}, &run, Setting{
			Now: now, RTT: 200 * time.Millisecond, MaxLead: MaxLead, BlockSize: bs, Blocks: (1 << 30) / bs,
			OpenEndedWindow: 16 << 20, Split: 1, PartSize: 4 << 20, Scanned: scanned,
		})
		scanned = max(scanned, p.End)
		off += lens[i]
		ahead := scanned*bs - off
		// What the policy asked for (the demand fetch and the window), or twice the
		// consumption past the reader, whichever reaches further; two blocks of rounding
		// (the window starts at the block after the reader and ends on a block).
		limit := max(dec.Fetch.End, dec.Ahead.End, off+provenAhead*dec.Consumed) - off + 2*bs
		if ahead > limit {
			t.Fatalf("read %d at %v: %d bytes requested past the reader, more than %d (consumed %d)",
				i, d, ahead, limit, dec.Consumed)
		}
	}
	consumed := off - 100<<20
	if total := scanned*bs - 100<<20; total > (1+provenAhead)*consumed+2*bs {
		t.Fatalf("a reader that stops after %d bytes had %d requested: more than three times", consumed, total)
	}
}
