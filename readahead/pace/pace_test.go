package pace

// The fixtures in testdata/*.txt drive the pure pacing state through simulated time
// (format and -rewrite: readahead/internal/fixture). Commands:
//
//	link rtt=10ms [maxn=16] [step=10ms] [solo] shared=14M | capped=4M [reader=100M]
//	split DUR
//	  T n=N [held]
//	config rtt=200ms size=1G [max=64M]
//	read T OFF LEN -> run=ID [new] lead=SIZE
//	play T OFF END LEN RATE
//	  T read OFF -> run=ID [new] lead=SIZE
//
// link sets up a Splitter on a simulated link: shared=RATE is one link whose total
// rate, bytes/s, is the same however many ranges share it; capped=RATE caps each range
// at RATE, so n ranges carry n times it. The reader wants reader= bytes/s (default
// 100M): while the link carries less, every read waits (is starved). split runs the
// link for DUR in steps, one Splitter.Update a step, and prints the start, every
// change of stream count or hold, and the end.
//
// config starts a readahead.Policy (default config) on a file of size bytes, with a
// pace.Run per run and an origin answering in rtt; read is one read at time T, and
// prints its run and the lead Run.Lead returns (bounded by max). play reads [OFF, END)
// in reads of LEN at RATE bytes/s from time T and prints the first read, every read of
// a new run, every read whose lead rose past twice the last one printed, and the last.
// Times are Go durations from the fixture's start; sizes and rates as in readahead.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/readahead"
	"github.com/playhead/playhead/readahead/internal/fixture"
)

func TestFixtures(t *testing.T) {
	fixture.RunAll(t, "testdata/*.txt", func(t *testing.T) fixture.Exec {
		var l *link
		var p *player
		return func(pos string, fields []string) ([]string, bool) {
			args := fields[1:]
			switch fields[0] {
			case "link":
				l = newLink(t, pos, args)
			case "split":
				need(t, pos, l != nil, "split before link")
				return l.split(duration(t, pos, one(t, pos, args))), true
			case "config":
				p = newPlayer(t, pos, args)
			case "read":
				need(t, pos, p != nil && len(args) == 3, "read wants config, then T OFF LEN")
				n := fixture.Sizes(t, pos, args[1:], 2)
				return []string{p.read(duration(t, pos, args[0]), n[0], n[1])}, false
			case "play":
				need(t, pos, p != nil && len(args) == 5, "play wants config, then T OFF END LEN RATE")
				n := fixture.Sizes(t, pos, args[1:], 4)
				return p.play(duration(t, pos, args[0]), n[0], n[1], n[2], n[3]), true
			default:
				t.Fatalf("%s: unknown command %q", pos, fields[0])
			}
			return nil, false
		}
	})
}

func need(t *testing.T, pos string, ok bool, msg string) {
	if !ok {
		t.Fatalf("%s: %s", pos, msg)
	}
}

func one(t *testing.T, pos string, args []string) string {
	need(t, pos, len(args) == 1, "want one argument")
	return args[0]
}

func duration(t *testing.T, pos, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %v", pos, err)
	}
	return d
}

func size(t *testing.T, pos, s string) int64 { return fixture.Sizes(t, pos, []string{s}, 1)[0] }

// epoch is the fixtures' time zero.
var epoch = time.Unix(1_000_000, 0)

// link is a Splitter on a simulated link read by one starving reader.
type link struct {
	sp          Splitter
	rtt, step   time.Duration
	maxN        int
	solo        bool
	shared      int64 // total bytes/s of a shared link, or 0
	capped      int64 // bytes/s per range of a capped link, or 0
	reader      int64 // bytes/s the reader wants
	now         time.Duration
	delivered   int64
	starved     int64
	lastN       int
	lastHeld    bool
	lastPrinted time.Duration
}

func newLink(t *testing.T, pos string, args []string) *link {
	kv := fixture.KeyValues(t, pos, args, "solo")
	l := &link{rtt: 10 * time.Millisecond, step: 10 * time.Millisecond, maxN: 16, reader: 100 << 20}
	for k, v := range kv {
		switch k {
		case "rtt":
			l.rtt = duration(t, pos, v)
		case "step":
			l.step = duration(t, pos, v)
		case "maxn":
			l.maxN = int(size(t, pos, v))
		case "solo":
			l.solo = true
		case "shared":
			l.shared = size(t, pos, v)
		case "capped":
			l.capped = size(t, pos, v)
		case "reader":
			l.reader = size(t, pos, v)
		default:
			t.Fatalf("%s: unknown link key %q", pos, k)
		}
	}
	need(t, pos, (l.shared > 0) != (l.capped > 0), "link wants one of shared= and capped=")
	return l
}

// rate is what the link carries with n ranges for a reader that wants l.reader.
func (l *link) rate(n int) int64 {
	carried := l.shared
	if l.capped > 0 {
		carried = int64(max(n, 1)) * l.capped
	}
	return min(carried, l.reader)
}

func (l *link) split(d time.Duration) []string {
	var out []string
	line := func() string {
		s := fmt.Sprintf("%v n=%d", l.now, max(l.sp.N(), 1))
		if l.sp.Held() {
			s += " held"
		}
		return s
	}
	for end := l.now + d; l.now < end; l.now += l.step {
		rate := l.rate(l.sp.N())
		got := rate * int64(l.step) / int64(time.Second)
		l.delivered += got
		if rate < l.reader {
			l.starved++
		}
		l.sp.Update(Sample{Now: epoch.Add(l.now), RTT: l.rtt, Delivered: l.delivered, Own: l.delivered, Consumed: l.delivered,
			Starved: l.starved, MaxN: l.maxN, Solo: l.solo, Capped: l.capped > 0})
		if n, held := max(l.sp.N(), 1), l.sp.Held(); len(out) == 0 || n != l.lastN || held != l.lastHeld {
			out = append(out, line())
			l.lastN, l.lastHeld, l.lastPrinted = n, held, l.now
		}
	}
	if l.lastPrinted != l.now-l.step {
		l.now -= l.step
		out = append(out, line())
		l.now += l.step
	}
	return out
}

// player is a readahead.Policy and the pace.Run of each of its runs.
type player struct {
	policy *readahead.Policy
	runs   map[int]*Run
	rtt    time.Duration
	max    int64
}

func newPlayer(t *testing.T, pos string, args []string) *player {
	p := &player{runs: map[int]*Run{}, max: MaxLead}
	fileSize := int64(-1)
	for k, v := range fixture.KeyValues(t, pos, args) {
		switch k {
		case "rtt":
			p.rtt = duration(t, pos, v)
		case "size":
			fileSize = size(t, pos, v)
		case "max":
			p.max = size(t, pos, v)
		default:
			t.Fatalf("%s: unknown config key %q", pos, k)
		}
	}
	need(t, pos, fileSize >= 0 && p.rtt > 0, "config wants rtt= and size=")
	p.policy = readahead.New(readahead.DefaultConfig(), fileSize)
	return p
}

// read is one read at time at that returns at once; it returns the run and its lead.
func (p *player) read(at time.Duration, off, n int64) string {
	dec := p.policy.Read(off, n)
	r := p.runs[dec.Run]
	if r == nil {
		r = &Run{}
		p.runs[dec.Run] = r
	}
	now := epoch.Add(at)
	r.Begin(now)
	lead := r.Lead(now, dec, p.rtt, p.max)
	r.End(now, now)
	var b strings.Builder
	fmt.Fprintf(&b, "run=%d", dec.Run)
	if dec.New {
		b.WriteString(" new")
	}
	fmt.Fprintf(&b, " lead=%s", fixture.FormatSize(lead))
	return b.String()
}

func (p *player) play(at time.Duration, off, end, n, rate int64) []string {
	var out []string
	printed := int64(-1)
	last := ""
	for i := int64(0); off+i*n < end; i++ {
		// Each read's time from the start, not summed, so no rounding accumulates.
		t := at + time.Duration(i*n*int64(time.Second)/rate)
		dec := p.read(t, off+i*n, n)
		line := fmt.Sprintf("%v read %s -> %s", t, fixture.FormatSize(off+i*n), dec)
		lead := leadOf(dec)
		if printed < 0 || strings.Contains(dec, " new") || lead > 2*printed {
			out = append(out, line)
			printed, last = lead, ""
		} else {
			last = line
		}
	}
	if last != "" {
		out = append(out, last)
	}
	return out
}

func leadOf(dec string) int64 {
	_, s, _ := strings.Cut(dec, "lead=")
	n, _ := fixture.ParseSize(s)
	return n
}

func TestReceiveWindow(t *testing.T) {
	for _, c := range []struct {
		bps  float64
		rtt  time.Duration
		want int64
	}{
		{3e6, 200 * time.Millisecond, 660_000}, // a 3 MB/s player on a 200 ms path
		{20e6, 200 * time.Millisecond, 4_400_000},
		{3e6, 10 * time.Millisecond, 33_000}, // a near origin (the body keeps a few segments)
		{1, time.Millisecond, 1},             // never 0 for a rate: 0 lifts the bound
		{0, 200 * time.Millisecond, 0},
	} {
		if got := ReceiveWindow(c.bps, c.rtt); got != c.want {
			t.Errorf("ReceiveWindow(%g, %v) = %d, want %d", c.bps, c.rtt, got, c.want)
		}
	}
	// Eight held 3 MB/s ranges on a 203 ms path must leave room on a 30 MB/s line: what
	// a window lets through per round trip is what the sender sends.
	if through := 8 * float64(ReceiveWindow(3e6, 203*time.Millisecond)) / 0.203; through > 28e6 {
		t.Errorf("eight held 3 MB/s ranges may take %.1f MB/s of a 30 MB/s line", through/1e6)
	}
	// And a held range is let through at least its reader's rate.
	if w := ReceiveWindow(3e6, 203*time.Millisecond); w < KeepUp(3e6, 203*time.Millisecond) {
		t.Errorf("ReceiveWindow %d is under a round trip of the rate (%d)", w, KeepUp(3e6, 203*time.Millisecond))
	}
}

func TestHoldLead(t *testing.T) {
	if got := HoldLead(8e6); got != 4_000_000 {
		t.Errorf("HoldLead(8 MB/s) = %d, want half a second of it", got)
	}
	if got := HoldLead(0); got != 0 {
		t.Errorf("HoldLead(0) = %d", got)
	}
}

// The path's round trip is the shortest answer lately: answers that waited for a new
// connection's handshakes, or in a queue, do not raise it; an old minimum gives way.
func TestPathRTT(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var p PathRTT
	p = p.Observe(t0, 420*time.Millisecond) // a range that dialed first
	if p.Min != 420*time.Millisecond {
		t.Fatalf("first answer: %v", p.Min)
	}
	p = p.Observe(t0.Add(time.Second), 205*time.Millisecond)
	for i, d := range []time.Duration{420, 390, 230, 0, -1} {
		p = p.Observe(t0.Add(time.Duration(2+i)*time.Second), d*time.Millisecond)
	}
	if p.Min != 205*time.Millisecond {
		t.Errorf("after longer answers and bad samples: %v, want the 205 ms seen", p.Min)
	}
	// 11 s after the 205 ms answer it no longer stands: the best since (230 ms) takes
	// its place, not a slow answer that comes then.
	p = p.Observe(t0.Add(12*time.Second), 420*time.Millisecond)
	if p.Min != 230*time.Millisecond {
		t.Errorf("after the window: %v, want the 230 ms seen since", p.Min)
	}
	// Nothing seen since that one: the new answer stands, however slow.
	p = PathRTT{}.Observe(t0, 205*time.Millisecond).Observe(t0.Add(11*time.Second), 300*time.Millisecond)
	if p.Min != 300*time.Millisecond {
		t.Errorf("after the window with no answer since: %v, want the new 300 ms", p.Min)
	}
}
