package readahead

// The fixtures in testdata/*.txt replay reads against a Policy and state the expected
// decisions, so a new case is one line (the format and -rewrite: internal/fixture).
// Commands:
//
//	config size=300M [block=256K seekfetch=1M trigger=512K initial=2M max=64M slack=4M runs=8 tail=256K]
//	read OFF LEN -> DECISION
//	scan OFF END LEN
//	  read OFF LEN -> DECISION
//	forget ID
//	runs -> N
//	ends HEAD TAIL
//	probed -> head=N tail=N
//
// config starts a fresh Policy; omitted keys keep DefaultConfig, size is required.
// read is one Policy.Read. scan issues sequential reads of LEN from OFF up to END and
// lists, indented, only the notable ones: the first and last, a new run, a drop, a
// superseded run, a change of run, Ahead becoming empty or growing. forget calls
// Policy.Forget; runs checks Policy.Runs; ends calls Policy.SetEnds (head and tail);
// probed checks Policy.Probed.
//
// Sizes are bytes with an optional K, M or G suffix (binary) and may be decimal when
// that is exact: 8.5M, 299.9375M. A DECISION is printed canonically as
//
//	run=ID [new] [superseded=ID] [dropped=ID,ID] fetch=RANGE ahead=RANGE [tail=RANGE]
//
// with RANGE as OFF-END or "-" when empty; an empty decision prints as "none".
// Run `go test ./readahead -run TestFixtures -rewrite` to regenerate the expectations
// after an intended change, then read the diff.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/playhead/playhead/readahead/internal/fixture"
)

func TestFixtures(t *testing.T) {
	fixture.RunAll(t, "testdata/*.txt", func(t *testing.T) fixture.Exec {
		var p *Policy
		return func(pos string, fields []string) ([]string, bool) {
			if fields[0] != "config" && p == nil {
				t.Fatalf("%s: %s before config", pos, fields[0])
			}
			switch fields[0] {
			case "config":
				p = New(parseConfig(t, pos, fields[1:]))
			case "read":
				args := fixture.Sizes(t, pos, fields[1:], 2)
				return []string{formatDecision(p.Read(args[0], args[1]))}, false
			case "scan":
				args := fixture.Sizes(t, pos, fields[1:], 3)
				return scan(p, args[0], args[1], args[2]), true
			case "forget":
				id, err := strconv.Atoi(fields[len(fields)-1])
				if err != nil || len(fields) != 2 {
					t.Fatalf("%s: forget wants one run id", pos)
				}
				p.Forget(id)
			case "runs":
				return []string{strconv.Itoa(p.Runs())}, false
			case "ends":
				args := fixture.Sizes(t, pos, fields[1:], 2)
				p.SetEnds(Ends{Head: args[0], Tail: args[1]})
			case "probed":
				e := p.Probed()
				return []string{"head=" + fixture.FormatSize(e.Head) + " tail=" + fixture.FormatSize(e.Tail)}, false
			default:
				t.Fatalf("%s: unknown command %q", pos, fields[0])
			}
			return nil, false
		}
	})
}

// scan reads [off, end) sequentially in reads of n bytes and returns the notable ones.
func scan(p *Policy, off, end, n int64) []string {
	var out []string
	var prev Decision
	last := ""
	for first := true; off < end; off += n {
		m := min(n, end-off)
		d := p.Read(off, m)
		line := fmt.Sprintf("read %s %s -> %s", fixture.FormatSize(off), fixture.FormatSize(m), formatDecision(d))
		notable := first || d.New || d.Dropped != nil || d.Superseded != noRun ||
			d.Run != prev.Run || d.Ahead.Len() > prev.Ahead.Len() ||
			(d.Ahead.Empty() && !prev.Ahead.Empty())
		if notable {
			out = append(out, line)
			last = ""
		} else {
			last = line
		}
		prev, first = d, false
	}
	if last != "" {
		out = append(out, last)
	}
	return out
}

func parseConfig(t *testing.T, pos string, kvs []string) (Config, int64) {
	cfg := DefaultConfig()
	size := int64(-1)
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("%s: %q is not key=value", pos, kv)
		}
		n := fixture.Sizes(t, pos, []string{v}, 1)[0]
		switch k {
		case "size":
			size = n
		case "block":
			cfg.BlockSize = n
		case "seekfetch":
			cfg.SeekFetch = n
		case "trigger":
			cfg.Trigger = n
		case "initial":
			cfg.InitialWindow = n
		case "max":
			cfg.MaxWindow = n
		case "grow":
			cfg.GrowEvery = n
		case "slack":
			cfg.Slack = n
		case "runs":
			cfg.MaxRuns = int(n)
		case "tail":
			cfg.Tail = n
		default:
			t.Fatalf("%s: unknown config key %q", pos, k)
		}
	}
	if size < 0 {
		t.Fatalf("%s: config needs size=", pos)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("%s: %v", pos, err)
	}
	return cfg, size
}

func formatRange(r Range) string {
	if r.Empty() {
		return "-"
	}
	return fixture.FormatSize(r.Off) + "-" + fixture.FormatSize(r.End)
}

func formatDecision(d Decision) string {
	if d.Run == noRun {
		if d.New || d.Skip || d.Superseded != noRun || d.Dropped != nil || d.Fetch != (Range{}) || d.Ahead != (Range{}) || d.Tail != (Range{}) {
			return fmt.Sprintf("BAD empty decision %+v", d)
		}
		return "none"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "run=%d", d.Run)
	if d.New {
		b.WriteString(" new")
	}
	if d.Skip {
		b.WriteString(" skip")
	}
	if d.Superseded != noRun {
		fmt.Fprintf(&b, " superseded=%d", d.Superseded)
	}
	if d.Dropped != nil {
		ids := make([]string, len(d.Dropped))
		for i, id := range d.Dropped {
			ids[i] = strconv.Itoa(id)
		}
		fmt.Fprintf(&b, " dropped=%s", strings.Join(ids, ","))
	}
	fmt.Fprintf(&b, " fetch=%s ahead=%s", formatRange(d.Fetch), formatRange(d.Ahead))
	if !d.Tail.Empty() {
		fmt.Fprintf(&b, " tail=%s", formatRange(d.Tail))
	}
	return b.String()
}

// A handle whose reader had the file's head before (another handle read it, the kernel's
// page cache answered its header reads) and whose first read lands mid-file is a player
// seeking to play from: its window goes out with that first read. Without the hint the
// same read is a lone read, and a read at the head is a parser's as ever. The hint is
// used up by the first run past the head that the end of the file does not clip, and
// it is no proof for a later seek: that one is carried only once the hinted run consumed
// Trigger, so a random reader pays one first window per handle, not one per seek.
func TestResumeElsewhereEngagesAFirstReadPastTheHead(t *testing.T) {
	cfg := DefaultConfig()
	const size = 200 << 20
	mid := int64(100<<20 + 12345)
	far := int64(150 << 20)

	p := New(cfg, size)
	if d := p.Read(mid, 36<<10); !d.Ahead.Empty() {
		t.Fatalf("first read mid-file without the hint: Ahead %v, want none until Trigger", d.Ahead)
	}

	p = New(cfg, size)
	p.ResumeElsewhere()
	d := p.Read(mid, 36<<10)
	if d.Ahead.Empty() || d.Ahead.End < mid+cfg.InitialWindow {
		t.Fatalf("first read mid-file after the head was read: Ahead %v, want the first window (%d bytes past %d)", d.Ahead, cfg.InitialWindow, mid)
	}
	if d := p.Read(far, 36<<10); !d.New || !d.Ahead.Empty() {
		t.Fatalf("a seek after the hinted run read 36 KiB: New %v, Ahead %v; want a new run with no window (nothing proven)", d.New, d.Ahead)
	}

	p = New(cfg, size)
	p.ResumeElsewhere()
	for off := mid; off < mid+cfg.Trigger+(64<<10); off += 64 << 10 {
		p.Read(off, 64<<10)
	}
	if d := p.Read(far, 36<<10); !d.New || d.Ahead.Empty() {
		t.Fatalf("a seek after the hinted run consumed Trigger: New %v, Ahead %v; want a carried run with its window", d.New, d.Ahead)
	}

	// A reader whose header reads reached us anyway (the kernel had dropped those pages)
	// and proved a run there: its seeks are carried by that run, and leave the hint
	// alone, so a second seek after a short first one is carried too.
	p = New(cfg, size)
	p.ResumeElsewhere()
	for off := int64(0); off < 1<<20; off += 128 << 10 {
		p.Read(off, 128<<10)
	}
	if d := p.Read(mid, 36<<10); !d.New || d.Ahead.Empty() {
		t.Fatalf("a seek away from a proven head run: New %v, Ahead %v; want a carried run", d.New, d.Ahead)
	}
	if d := p.Read(far, 36<<10); !d.New || d.Ahead.Empty() {
		t.Fatalf("a second seek, after 36 KiB of the first: New %v, Ahead %v; want it carried (the hint unspent, the first seek carried by proof)", d.New, d.Ahead)
	}

	// An MKV's player reads its cues near the end first, then seeks to play from: the
	// read whose window the end of the file clips does not use the hint up.
	p = New(cfg, size)
	p.ResumeElsewhere()
	p.Read(size-4096, 4096)
	if d := p.Read(mid, 36<<10); !d.New || d.Ahead.Empty() || d.Ahead.End < mid+cfg.InitialWindow {
		t.Fatalf("a seek to play from after an index read at the end: New %v, Ahead %v; want the first window", d.New, d.Ahead)
	}

	p = New(cfg, size)
	p.ResumeElsewhere()
	if d := p.Read(0, 64<<10); !d.Ahead.Empty() {
		t.Fatalf("a header read at the head: Ahead %v, want none (a parser's read)", d.Ahead)
	}
	if d := p.Read(mid, 36<<10); d.Ahead.Empty() {
		t.Fatalf("a seek to play from after header reads that reached us: Ahead %v, want the first window (the hint lasts until a run past the head uses it)", d.Ahead)
	}
}

// Decision.Start is the run's lowest offset after the read, whatever the arrival order:
// the fetcher tells a seek's run from a copy's by it (readahead/pace.Sample.Start).
func TestDecisionStartIsTheRunsLowestOffset(t *testing.T) {
	p := New(DefaultConfig(), 300<<20)
	for _, c := range []struct{ off, n, start int64 }{
		{0, 64 << 10, 0},
		{100 << 20, 256 << 10, 100 << 20},                 // a seek: a new run
		{101 << 20, 256 << 10, 100 << 20},                 // the same run, further on
		{100<<20 - 512<<10, 256 << 10, 100<<20 - 512<<10}, // a read below it lowers the start
	} {
		if d := p.Read(c.off, c.n); d.Start != c.start {
			t.Errorf("read %d+%d: start %d, want %d", c.off, c.n, d.Start, c.start)
		}
	}
}

// With the hint, a read within the head a first read fetches is a parser's whose earlier
// reads the page cache answered (a library rescan whose pages were partly evicted), not
// a seek to play from: it engages no window. Past the head it does.
func TestResumeElsewhereLeavesTheHeadAlone(t *testing.T) {
	cfg := DefaultConfig()
	p := New(cfg, 200<<20)
	p.ResumeElsewhere()
	if d := p.Read(300<<10, 36<<10); !d.Ahead.Empty() {
		t.Fatalf("a read at 300 KiB with the hint: ahead %v, want none", d.Ahead)
	}
	if d := p.Read(100<<20, 36<<10); !d.New || d.Ahead.Empty() {
		t.Fatalf("a seek to 100 MiB with the hint: %+v, want a window", d)
	}
}
