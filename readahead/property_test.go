package readahead

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// genConfig draws a valid Config with read-ahead enabled unless allowDisabled.
func genConfig(t *rapid.T, allowDisabled bool) Config {
	c := Config{
		BlockSize: rapid.SampledFrom([]int64{4 << 10, 64 << 10, 256 << 10, 1 << 20}).Draw(t, "block"),
		SeekFetch: rapid.Int64Range(0, 2<<20).Draw(t, "seekfetch"),
		Trigger:   rapid.Int64Range(0, 4<<20).Draw(t, "trigger"),
		Slack:     rapid.Int64Range(64<<10, 8<<20).Draw(t, "slack"),
		MaxRuns:   rapid.IntRange(1, 8).Draw(t, "runs"),
		Tail:      rapid.SampledFrom([]int64{0, 4 << 10, 64 << 10, 256 << 10, 1 << 20}).Draw(t, "tail"),
	}
	c.InitialWindow = rapid.Int64Range(c.BlockSize, 8<<20).Draw(t, "initial")
	c.MaxWindow = rapid.Int64Range(c.InitialWindow, 64<<20).Draw(t, "max")
	if allowDisabled && rapid.Bool().Draw(t, "disabled") {
		c.MaxWindow = 0
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("generated invalid config: %v", err)
	}
	return c
}

// checkRanges checks what holds for every decision: ranges inside the file, block
// aligned except at EOF, Fetch covering the read, Ahead after Fetch and within the cap.
func checkRanges(t *rapid.T, c Config, size, off, n int64, d Decision) {
	if d.Run == noRun {
		if off >= 0 && off < size && n > 0 {
			t.Fatalf("read %d+%d inside the file got an empty decision", off, n)
		}
		if d.New || d.Superseded != noRun || d.Dropped != nil || d.Fetch != (Range{}) || d.Ahead != (Range{}) || d.Tail != (Range{}) {
			t.Fatalf("empty decision with content: %+v", d)
		}
		return
	}
	b := blocks{size: c.BlockSize, limit: size}
	for _, r := range []Range{d.Fetch, d.Ahead, d.Tail} {
		if r == (Range{}) {
			continue
		}
		if r.Empty() || r.Off < 0 || r.End > size || r.Off%c.BlockSize != 0 ||
			(r.End%c.BlockSize != 0 && r.End != size) {
			t.Fatalf("read %d+%d: range %v not aligned to %d inside [0, %d)", off, n, r, c.BlockSize, size)
		}
	}
	if end := min(off+n, size); d.Fetch.Off > off || d.Fetch.End < end {
		t.Fatalf("read %d+%d: fetch %v does not cover [%d, %d)", off, n, d.Fetch, off, end)
	}
	if !d.Ahead.Empty() && d.Ahead.Off < d.Fetch.End {
		t.Fatalf("read %d+%d: ahead %v overlaps fetch %v", off, n, d.Ahead, d.Fetch)
	}
	if d.Ahead.Len() > b.up(c.MaxWindow) {
		t.Fatalf("read %d+%d: ahead %v longer than max window %d", off, n, d.Ahead, c.MaxWindow)
	}
	if !d.Tail.Empty() && (d.Tail.End != size || d.Tail.Off < max(d.Fetch.End, d.Ahead.End)) {
		t.Fatalf("read %d+%d: tail %v not past fetch %v and ahead %v up to the size %d", off, n, d.Tail, d.Fetch, d.Ahead, size)
	}
}

// TestShuffledScanIsOneRun: a sequential scan whose reads arrive reordered by at most
// Slack/2 is one run, and read-ahead engages exactly once it has consumed Trigger.
func TestShuffledScanIsOneRun(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genConfig(t, false)
		n := rapid.Int64Range(1, min(256<<10, c.Slack/2)).Draw(t, "n")
		count := rapid.IntRange(1, 200).Draw(t, "count")
		start := rapid.Int64Range(0, 100<<20).Draw(t, "start")
		size := start + int64(count)*n + rapid.Int64Range(0, 8<<20).Draw(t, "tail")
		// Read i arrives in order of i + jitter(i), jitter in [0, maxJitter]: a read can
		// then only overtake, or be overtaken by, reads less than maxJitter reads away,
		// so no arrival lands more than maxJitter*n <= Slack/2 from the furthest point.
		maxJitter := int(min(c.Slack/2/n, int64(count)))
		type read struct{ i, key int }
		reads := make([]read, count)
		for i := range reads {
			reads[i] = read{i, i + rapid.IntRange(0, maxJitter).Draw(t, "jitter")}
		}
		slices.SortStableFunc(reads, func(a, b read) int { return a.key - b.key })

		p := New(c, size)
		lowest, furthest := size, int64(0)
		for k, r := range reads {
			off := start + int64(r.i)*n
			d := p.Read(off, n)
			checkRanges(t, c, size, off, n, d)
			lowest, furthest = min(lowest, off), max(furthest, off+n)
			if d.Run != 1 || d.New != (k == 0) || d.Dropped != nil || d.Superseded != noRun {
				t.Fatalf("arrival %d (read %d at %d) left the run: %+v", k, r.i, off, d)
			}
			consumed := furthest - lowest
			if !d.Ahead.Empty() && consumed < c.Trigger {
				t.Fatalf("arrival %d: ahead %v after only %d of %d trigger bytes", k, d.Ahead, consumed, c.Trigger)
			}
			// A new run's seek fetch may cover the whole first window, and at EOF
			// there is nothing ahead; a header parser's run (its first read short, in
			// the first block) waits until it reads past the head that read fetched;
			// elsewhere the window must be there.
			probing := start+int64(reads[0].i)*n < c.BlockSize && n < probeRead && furthest <= c.headFetch()
			if d.Ahead.Empty() && consumed >= c.Trigger && !d.New && !probing && (blocks{c.BlockSize, size}).up(furthest) < size {
				t.Fatalf("arrival %d: no ahead after %d bytes consumed (trigger %d)", k, consumed, c.Trigger)
			}
		}
		if p.Runs() != 1 {
			t.Fatalf("%d runs after one scan", p.Runs())
		}
	})
}

// TestArbitraryReadsKeepInvariants replays random reads and forgets against a model of
// run membership: the run chosen is the closest within Slack, ids only grow,
// drops and supersedes name live runs, and every range is well formed.
func TestArbitraryReadsKeepInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genConfig(t, true)
		size := rapid.Int64Range(0, 1<<30).Draw(t, "size")
		p := New(c, size)
		furthest := map[int]int64{} // live run id -> furthest point, the model
		last, lastID := noRun, 0
		readBefore := false // a read inside the file was made
		for range rapid.IntRange(1, 100).Draw(t, "ops") {
			if rapid.IntRange(0, 9).Draw(t, "op") == 0 {
				id := rapid.IntRange(0, lastID+1).Draw(t, "forget")
				p.Forget(id)
				delete(furthest, id)
				if id == last {
					last = noRun
				}
				continue
			}
			off := rapid.Int64Range(-1, size+(1<<20)).Draw(t, "off")
			n := rapid.Int64Range(-1, 64<<20).Draw(t, "n")
			d := p.Read(off, n)
			checkRanges(t, c, size, off, n, d)
			if d.Run == noRun {
				continue
			}
			checkTail(t, c, size, off, n, d, !readBefore)
			readBefore = true
			closest := int64(-1)
			for _, f := range furthest {
				if dist := max(off-f, f-off); dist <= c.Slack && (closest < 0 || dist < closest) {
					closest = dist
				}
			}
			if d.New {
				if closest >= 0 {
					t.Fatalf("read %d opened a new run though one is %d away", off, closest)
				}
				if d.Run != lastID+1 {
					t.Fatalf("new run id %d after %d", d.Run, lastID)
				}
				lastID = d.Run
				for _, id := range d.Dropped {
					if _, ok := furthest[id]; !ok {
						t.Fatalf("dropped unknown run %d", id)
					}
					delete(furthest, id)
				}
				if want := last; d.Superseded != want && !(d.Superseded == noRun && slices.Contains(d.Dropped, want)) {
					t.Fatalf("superseded %d, previous read was run %d", d.Superseded, want)
				}
				furthest[d.Run] = off
			} else {
				f, ok := furthest[d.Run]
				if !ok || max(off-f, f-off) != closest || d.Dropped != nil || d.Superseded != noRun {
					t.Fatalf("read %d joined run %d (furthest %d, live %v), closest is %d away: %+v",
						off, d.Run, f, ok, closest, d)
				}
			}
			furthest[d.Run] = max(furthest[d.Run], min(off+n, size))
			last = d.Run
			if p.Runs() != len(furthest) || p.Runs() > c.MaxRuns {
				t.Fatalf("policy tracks %d runs, model %d, max %d", p.Runs(), len(furthest), c.MaxRuns)
			}
		}
	})
}

// checkTail checks the tail a decision names, and the Fetch a tail merged into: only the
// Policy's first read, starting in the first block and without read-ahead (a reader
// that engaged it gets its window, not a tail), names one, and then what it adds
// to the read (the tail, or Fetch beyond its seek fetch) is at most the last Config.Tail
// bytes in whole blocks plus the tailMerge blocks before them and a block of rounding.
// A first read at the head of a file asks for something up to the file's last byte.
func checkTail(t *rapid.T, c Config, size, off, n int64, d Decision, first bool) {
	b := blocks{size: c.BlockSize, limit: size}
	head := first && off < c.BlockSize && c.Tail > 0 && d.Ahead.Empty()
	usual := b.span(off, off+min(n, size-off)) // Fetch without a tail
	if d.New {
		usual = b.span(off, max(off+min(n, size-off), b.down(off)+c.SeekFetch))
	}
	if !head {
		if !d.Tail.Empty() || d.Fetch != usual {
			t.Fatalf("read %d+%d (first %v) got tail %v, fetch %v (want %v)", off, n, first, d.Tail, d.Fetch, usual)
		}
		return
	}
	if !d.Tail.Empty() && d.Fetch != usual {
		t.Fatalf("read %d+%d: tail %v and fetch %v stretched from %v", off, n, d.Tail, d.Fetch, usual)
	}
	bound := b.up(c.Tail) + (tailMerge+1)*c.BlockSize // the tail's blocks, the gap and rounding
	if extra := d.Tail.Len() + d.Fetch.Len() - usual.Len(); extra > bound {
		t.Fatalf("read %d+%d: tail %v and fetch %v add %d bytes, bound %d", off, n, d.Tail, d.Fetch, extra, bound)
	}
	if reach := max(d.Fetch.End, d.Ahead.End, d.Tail.End); reach != size {
		t.Fatalf("read %d+%d: the last %d bytes are not asked for: fetch %v ahead %v tail %v", off, n, c.Tail, d.Fetch, d.Ahead, d.Tail)
	}
}

// TestHeadReadNamesTail: a handle's first read in the first block of a file of any size
// names its tail within the bounds of checkTail, and no later read does.
func TestHeadReadNamesTail(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genConfig(t, true)
		size := rapid.Int64Range(1, 1<<30).Draw(t, "size")
		if rapid.Bool().Draw(t, "small") {
			size = rapid.Int64Range(1, 8*c.BlockSize+c.SeekFetch+c.Tail).Draw(t, "small size")
		}
		p := New(c, size)
		for i := range rapid.IntRange(1, 4).Draw(t, "reads") {
			off := rapid.Int64Range(0, min(c.BlockSize, size)-1).Draw(t, "off")
			if i > 0 && rapid.Bool().Draw(t, "anywhere") {
				off = rapid.Int64Range(0, size-1).Draw(t, "off anywhere")
			}
			n := rapid.Int64Range(1, 4<<20).Draw(t, "n")
			d := p.Read(off, n)
			checkRanges(t, c, size, off, n, d)
			checkTail(t, c, size, off, n, d, i == 0)
		}
	})
}
