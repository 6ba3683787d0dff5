package readahead

// The fixtures in testdata/*.txt replay reads against a Policy and state the expected
// decisions, so a new case is one line. Format, one command per line:
//
//	# comment (kept on -rewrite), blank lines too
//	config size=300M [block=256K seekfetch=1M trigger=512K initial=2M max=64M slack=4M runs=8]
//	read OFF LEN -> DECISION
//	scan OFF END LEN
//	  read OFF LEN -> DECISION
//	forget ID
//	runs -> N
//
// config starts a fresh Policy; omitted keys keep DefaultConfig, size is required.
// read is one Policy.Read. scan issues sequential reads of LEN from OFF up to END and
// lists, indented, only the notable ones: the first and last, a new run, a drop, a
// superseded run, a change of run, Ahead becoming empty or growing. forget calls
// Policy.Forget; runs checks Policy.Runs.
//
// Sizes are bytes with an optional K, M or G suffix (binary) and may be decimal when
// that is exact: 8.5M, 299.9375M. A DECISION is printed canonically as
//
//	run=ID [new] [superseded=ID] [dropped=ID,ID] fetch=RANGE ahead=RANGE
//
// with RANGE as OFF-END or "-" when empty; an empty decision prints as "none".
// Run `go test ./readahead -run TestFixtures -rewrite` to regenerate the expectations
// after an intended change, then read the diff.

import (
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata expectations with actual output")

func TestFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runFixture(t, file)
		})
	}
}

// fixtureLine is one command and the output it expects.
type fixtureLine struct {
	pos  string   // file:line, for messages
	text string   // the command, or a comment/blank line kept verbatim
	want []string // expected output lines
	cmd  bool     // false for comments and blank lines
}

func parseFixture(t *testing.T, file string) []fixtureLine {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []fixtureLine
	for i, raw := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		pos := fmt.Sprintf("%s:%d", file, i+1)
		line := strings.TrimSpace(raw)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			out = append(out, fixtureLine{pos: pos, text: line})
		case raw[0] == ' ' || raw[0] == '\t':
			// An indented line is output of the command above it.
			if len(out) == 0 || !out[len(out)-1].cmd {
				t.Fatalf("%s: indented line without a command", pos)
			}
			out[len(out)-1].want = append(out[len(out)-1].want, line)
		default:
			cmd, want, ok := strings.Cut(line, "->")
			fl := fixtureLine{pos: pos, text: strings.TrimSpace(cmd), cmd: true}
			if ok {
				fl.want = []string{strings.TrimSpace(want)}
			}
			out = append(out, fl)
		}
	}
	return out
}

func runFixture(t *testing.T, file string) {
	lines := parseFixture(t, file)
	var p *Policy
	var rewritten strings.Builder
	for _, l := range lines {
		if !l.cmd {
			rewritten.WriteString(l.text + "\n")
			continue
		}
		fields := strings.Fields(l.text)
		if fields[0] != "config" && p == nil {
			t.Fatalf("%s: %s before config", l.pos, fields[0])
		}
		var got []string
		multiline := false
		switch fields[0] {
		case "config":
			p = New(parseConfig(t, l.pos, fields[1:]))
		case "read":
			args := sizes(t, l.pos, fields[1:], 2)
			got = []string{formatDecision(p.Read(args[0], args[1]))}
		case "scan":
			args := sizes(t, l.pos, fields[1:], 3)
			got = scan(p, args[0], args[1], args[2])
			multiline = true
		case "forget":
			id, err := strconv.Atoi(fields[len(fields)-1])
			if err != nil || len(fields) != 2 {
				t.Fatalf("%s: forget wants one run id", l.pos)
			}
			p.Forget(id)
		case "runs":
			got = []string{strconv.Itoa(p.Runs())}
		default:
			t.Fatalf("%s: unknown command %q", l.pos, fields[0])
		}

		switch {
		case multiline:
			rewritten.WriteString(l.text + "\n")
			for _, g := range got {
				rewritten.WriteString("  " + g + "\n")
			}
		case got != nil:
			rewritten.WriteString(l.text + " -> " + got[0] + "\n")
		default:
			rewritten.WriteString(l.text + "\n")
		}
		if !*rewrite && strings.Join(got, "\n") != strings.Join(l.want, "\n") {
			t.Errorf("%s: %s\n got: %s\nwant: %s", l.pos, l.text,
				strings.Join(got, "\n      "), strings.Join(l.want, "\n      "))
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(rewritten.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// scan reads [off, end) sequentially in reads of n bytes and returns the notable ones.
func scan(p *Policy, off, end, n int64) []string {
	var out []string
	var prev Decision
	last := ""
	for first := true; off < end; off += n {
		m := min(n, end-off)
		d := p.Read(off, m)
		line := fmt.Sprintf("read %s %s -> %s", formatSize(off), formatSize(m), formatDecision(d))
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
		n := sizes(t, pos, []string{v}, 1)[0]
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

// sizes parses exactly want size arguments.
func sizes(t *testing.T, pos string, args []string, want int) []int64 {
	if len(args) != want {
		t.Fatalf("%s: want %d arguments, got %q", pos, want, args)
	}
	out := make([]int64, want)
	for i, a := range args {
		n, err := parseSize(a)
		if err != nil {
			t.Fatalf("%s: %v", pos, err)
		}
		out[i] = n
	}
	return out
}

var units = map[byte]int64{'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}

// parseSize parses "123", "64K", "8.5M", "-1"; a decimal must name a whole byte.
func parseSize(s string) (int64, error) {
	num, unit := s, int64(1)
	if s != "" {
		if u, ok := units[s[len(s)-1]]; ok {
			num, unit = s[:len(s)-1], u
		}
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("bad size %q", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(unit))
	if !r.IsInt() || !r.Num().IsInt64() {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	return r.Num().Int64(), nil
}

// formatSize prints n the shortest readable exact way: K below 1 MiB, M (with up to
// four decimals) above, bytes when neither is exact.
func formatSize(n int64) string {
	const maxDecimals = 4
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 1<<20:
		r := new(big.Rat).SetFrac64(n, 1<<20)
		if s := r.FloatString(maxDecimals); mustParse(s+"M") == n {
			return strings.TrimSuffix(strings.TrimRight(s, "0"), ".") + "M"
		}
	}
	if n != 0 && n%(1<<10) == 0 {
		return fmt.Sprintf("%dK", n>>10)
	}
	return strconv.FormatInt(n, 10)
}

func mustParse(s string) int64 {
	n, err := parseSize(s)
	if err != nil {
		return -1
	}
	return n
}

func formatRange(r Range) string {
	if r.Empty() {
		return "-"
	}
	return formatSize(r.Off) + "-" + formatSize(r.End)
}

func formatDecision(d Decision) string {
	if d.Run == noRun {
		if d.New || d.Skip || d.Superseded != noRun || d.Dropped != nil || d.Fetch != (Range{}) || d.Ahead != (Range{}) {
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
	return b.String()
}

func TestSizeFormatRoundTrips(t *testing.T) {
	for _, s := range []string{"0", "1", "64K", "1M", "8.5M", "299.9375M", "1G", "1.5G", "-1", "12345"} {
		n, err := parseSize(s)
		if err != nil {
			t.Fatalf("parse %q: %v", s, err)
		}
		if back := mustParse(formatSize(n)); back != n {
			t.Errorf("%q -> %d -> %q -> %d", s, n, formatSize(n), back)
		}
	}
	if _, err := parseSize("8.3M"); err == nil {
		t.Error("8.3M is not a whole number of bytes but parsed")
	}
}
