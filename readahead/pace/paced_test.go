package pace

import (
	"testing"
	"time"

	"github.com/playhead/playhead/readahead"
)

// playClaims plays a reader at bps bytes/s from offset 0 in 256 KiB reads for d, every
// read planned by Claim, and calls check with each read's decision, plan and the bytes
// its run then had requested past its furthest point.
func playClaims(t *testing.T, bps float64, d time.Duration, left bool, check func(i int, dec readahead.Decision, p Plan, ahead int64)) {
	t.Helper()
	const bs = 256 << 10
	size := int64(1 << 30)
	pol := readahead.New(readahead.DefaultConfig(), size)
	var run Run
	scanned := int64(0)
	step := time.Duration(float64(bs) / bps * float64(time.Second))
	for i, off := 0, int64(0); time.Duration(i)*step < d; i, off = i+1, off+bs {
		dec := pol.Read(off, bs)
		p := Claim(Read{Dec: dec, Policy: true, First: off / bs, End: off/bs + 1}, &run, Setting{
			Now: epoch.Add(time.Duration(i) * step), RTT: 200 * time.Millisecond, MaxLead: MaxLead,
			BlockSize: bs, Blocks: size / bs, OpenEndedWindow: 16 << 20, Split: 1, PartSize: 4 << 20,
			Scanned: scanned, Left: left,
		})
		scanned = max(scanned, p.End)
		check(i, dec, p, scanned*bs-dec.Ahead.Off)
	}
}

// A player's run is one open-ended range from its first claim, and once its rate is
// known it claims about a second of play past its furthest point, growing with what it
// has consumed, not its window: a 3 MB/s player 40 s in, its window grown to 64 MiB,
// has under 12 MB requested ahead of it.
func TestClaimOpensAPlayersRunAtOnceAndPacesIt(t *testing.T) {
	const bps = 3e6
	var last readahead.Decision
	var lastAhead int64
	playClaims(t, bps, 40*time.Second, false, func(i int, dec readahead.Decision, p Plan, ahead int64) {
		if !dec.Ahead.Empty() && !p.OpenEnded {
			t.Fatalf("read %d: window %d not open-ended", i, dec.Ahead.Len())
		}
		if i > 40 { // rate known (about 2 s in)
			limit := max(Lead(bps*1.2, 200*time.Millisecond, MaxLead), int64(bps*1.2)+dec.Consumed/pacedGrowth) + 2*(256<<10)
			if ahead > limit {
				t.Fatalf("read %d: %d bytes requested ahead, want at most %d (window %d)", i, ahead, limit, dec.Ahead.Len())
			}
		}
		last, lastAhead = dec, ahead
	})
	if last.Ahead.Len() < 32<<20 || lastAhead > 12e6 || lastAhead < 3e6 {
		t.Fatalf("after 40 s: window %d, %d bytes requested ahead; want a window of 32 MiB or more and 3 to 12 MB ahead",
			last.Ahead.Len(), lastAhead)
	}
}

// A reader that has left a run of the file gets bounded ranges, as the window says:
// an open-ended range it abandoned would leave what the path buffers behind.
func TestClaimBoundsTheRunsOfAReaderThatLeft(t *testing.T) {
	opened := false
	playClaims(t, 3e6, 3*time.Second, true, func(i int, dec readahead.Decision, p Plan, ahead int64) {
		opened = opened || p.OpenEnded
	})
	if opened {
		t.Fatal("a reader that left a run had a 5 MiB window opened at once")
	}
}

// A run that begins past the file's head is a seek's: its window is bounded, as a
// demuxer decoding one frame at its target stops after a few MB.
func TestClaimBoundsARunThatBeginsPastTheHead(t *testing.T) {
	const bs = 256 << 10
	size := int64(1 << 30)
	pol := readahead.New(readahead.DefaultConfig(), size)
	var run Run
	windows := 0
	for i, off := 0, int64(100<<20); i < 8; i, off = i+1, off+bs {
		dec := pol.Read(off, bs)
		p := Claim(Read{Dec: dec, Policy: true, First: off / bs, End: off/bs + 1}, &run, Setting{
			Now: epoch.Add(time.Duration(i) * 80 * time.Millisecond), RTT: 200 * time.Millisecond, MaxLead: MaxLead,
			BlockSize: bs, Blocks: size / bs, OpenEndedWindow: 16 << 20, Split: 1, PartSize: 4 << 20,
		})
		if dec.Ahead.Len() >= OpenAtOnce {
			windows++
			if p.OpenEnded {
				t.Fatalf("read %d at %d: a seek's %d-byte window opened at once", i, off, dec.Ahead.Len())
			}
		}
	}
	if windows == 0 {
		t.Fatal("no read had a player's window: the test tests nothing")
	}
}
