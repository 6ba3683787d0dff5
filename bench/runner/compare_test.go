package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/playhead/playhead/bench/plot"
	"github.com/playhead/playhead/bench/report"
	"github.com/playhead/playhead/bench/scenario"
)

// The test binary doubles as a fake rclone: run with fakeRcloneEnv=1, it takes rclone's
// mount command line, logs it to the file named by fakeRcloneLogEnv, and "mounts" by
// copying the origin's whole tree (through its JSON listing) into the mountpoint, one
// top-level directory at a time so a ready file is never half written. SIGTERM ends it
// with rclone's exit code. So the comparator's column runs through the real ProcessSUT,
// argv and exit handling included, with no rclone and no FUSE.
const (
	fakeRcloneEnv    = "PLAYHEAD_TEST_FAKE_RCLONE"
	fakeRcloneLogEnv = "PLAYHEAD_TEST_FAKE_RCLONE_LOG"
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeRcloneEnv) == "1" {
		os.Exit(fakeRclone(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func fakeRclone(args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "fake rclone: "+format+"\n", a...)
		return 2
	}
	if log := os.Getenv(fakeRcloneLogEnv); log != "" {
		f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fail("%v", err)
		}
		fmt.Fprintf(f, "%q\n", args)
		f.Close()
	}
	if len(args) < 3 || args[0] != "mount" || args[1] != ":http:" {
		return fail("want mount :http: DIR ..., got %q", args)
	}
	dir := args[2]
	var url, cache string
	config := false
	for i := 3; i+1 < len(args); i++ {
		switch args[i] {
		case "--http-url":
			url = args[i+1]
		case "--cache-dir":
			cache = args[i+1]
		case "--config":
			config = args[i+1] == ""
		}
	}
	if url == "" || cache == "" || !config {
		return fail("want --http-url, --cache-dir and --config \"\", got %q", args)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	staging := filepath.Join(cache, "staging")
	if err := mirror(url, staging); err != nil {
		return fail("%v", err)
	}
	entries, err := os.ReadDir(staging)
	if err != nil {
		return fail("%v", err)
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(staging, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			return fail("%v", err)
		}
	}
	<-term
	return rcloneTermExit
}

// mirror copies the directory at url (the built-in origin's JSON listing) into dir.
func mirror(url, dir string) error {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	var entries []struct{ Name, Type string }
	err = json.NewDecoder(resp.Body).Decode(&entries)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("listing %s: %w", url, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type == "directory" {
			if err := mirror(url+e.Name+"/", filepath.Join(dir, e.Name)); err != nil {
				return err
			}
			continue
		}
		if err := download(req.Context(), url+e.Name, filepath.Join(dir, e.Name), false); err != nil {
			return err
		}
	}
	return nil
}

// TestRunComparesSystems runs tiny play, thumbs and bulk cases on playhead's engine, a
// fake rclone (defaults and tuned), a comparator that is not installed, and the three
// ceilings, then checks the columns, what the ceilings measured, the legend, the JSON's
// reads and the plots.
func TestRunComparesSystems(t *testing.T) {
	cases, err := scenario.Cases([]string{"play", "thumbs", "bulk"}, tinySizes())
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argvLog := filepath.Join(t.TempDir(), "argv.log")
	t.Setenv(fakeRcloneEnv, "1")
	t.Setenv(fakeRcloneLogEnv, argvLog)
	rc := Rclone{Path: exe, Version: "rclone v0.0.0-fake", ChunkStreams: true}
	systems := []System{{Info: report.System{Name: "playhead", Kind: report.KindSUT}, SUT: engineSUT{}}}
	systems = append(systems, RcloneSystems(rc, nil, "cloud", OriginBuiltin, nil)...)
	missing := RcloneSystems(Rclone{}, errors.New("rclone not found (looked for nowhere)"), "far", OriginBuiltin, nil)[0]
	missing.Info.Name = "rclone missing"
	systems = append(systems, missing, HTTPOneConnSystem(), HTTPParallelSystem(), LocalDiskSystem())

	cfg := testConfig(t, cases, nil)
	cfg.Systems, cfg.Trials = systems, 1
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := report.Print(&out, rep); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())

	if len(rep.Header.Systems) != len(systems) || len(rep.Cases) != len(cases)*len(systems) {
		t.Fatalf("%d systems and %d results, want %d and %d", len(rep.Header.Systems), len(rep.Cases),
			len(systems), len(cases)*len(systems))
	}
	result := func(name, system string) report.CaseResult {
		for _, c := range rep.Cases {
			if c.Name == name && c.System == system {
				return c
			}
		}
		t.Fatalf("no result for %s on %s", name, system)
		return report.CaseResult{}
	}
	const thumbs = "thumbs 3 files"
	for _, c := range rep.Cases {
		switch {
		case c.System == "rclone missing":
			if !strings.Contains(c.Skipped, "rclone not found") {
				t.Errorf("%s [%s]: skipped %q, want the reason", c.Name, c.System, c.Skipped)
			}
		case c.System == "http 16 conns" && c.Scenario == "thumbs":
			if c.NotApplicable == "" || len(c.Trials) != 0 {
				t.Errorf("%s [%s]: ran or has no reason: %+v", c.Name, c.System, c)
			}
		case c.Failed():
			t.Errorf("%s [%s] failed: %+v %s", c.Name, c.System, c.Trials, c.Skipped)
		default:
			if len(c.Trials[0].Reads) == 0 {
				t.Errorf("%s [%s]: no reads recorded", c.Name, c.System)
			}
		}
	}

	// What the ceilings measured is what they did: exactly the probes, no bytes from
	// the origin for the local disk, no daemon figures.
	probe := result(thumbs, "http 1 conn").Trials[0].Figures
	if probe[scenario.FigOriginBytesPerFile] != 2*64<<10 || probe[scenario.FigOriginRequests] != 6 {
		t.Errorf("http 1 conn thumbs: %v bytes per file in %v requests, want %d in 6",
			probe[scenario.FigOriginBytesPerFile], probe[scenario.FigOriginRequests], 2*64<<10)
	}
	if _, ok := probe[scenario.FigPeakRSS]; ok {
		t.Error("a ceiling has a daemon's peak RSS")
	}
	local := result("bulk 3MiB", "local disk").Trials[0].Figures
	if local[scenario.FigOriginBytes] != 0 || local[scenario.FigCachedThroughput] == 0 {
		t.Errorf("local disk bulk: %v origin bytes, cached %v", local[scenario.FigOriginBytes], local[scenario.FigCachedThroughput])
	}
	par := result("bulk 3MiB", "http 16 conns").Trials[0].Figures
	if par[scenario.FigOriginBytes] != 3<<20 || par[scenario.FigOriginRequests] != 1 {
		// 3 MiB is one 4 MiB chunk: one request, and no second read (uncached).
		t.Errorf("http 16 conns bulk: %v bytes in %v requests", par[scenario.FigOriginBytes], par[scenario.FigOriginRequests])
	}
	played := result(cases[0].Name, "http 16 conns").Trials[0].Figures
	if played[scenario.FigOriginBytes] != float64(tinySizes().PlayFile) {
		t.Errorf("http 16 conns %s: %v origin bytes, want the file's %d", cases[0].Name, played[scenario.FigOriginBytes], tinySizes().PlayFile)
	}
	if _, ok := par[scenario.FigCachedThroughput]; ok {
		t.Error("an uncached ceiling has a cached throughput")
	}

	// The fake rclone ran with rclone's command lines: defaults bare, tuned with streams.
	data, err := os.ReadFile(argvLog)
	if err != nil {
		t.Fatal(err)
	}
	var plain, tuned int
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		if strings.Contains(line, chunkStreamsFlag) && strings.Contains(line, `"--vfs-cache-mode" "full"`) {
			tuned++
		} else if !strings.Contains(line, "--vfs") {
			plain++
		}
	}
	if plain != len(cases) || tuned != len(cases) {
		t.Errorf("fake rclone ran %d times plain and %d tuned, want %d each:\n%s", plain, tuned, len(cases), data)
	}

	text := out.String()
	for _, want := range []string{"playhead", "rclone tuned", "http 16 conns", "local disk", " *",
		whyParallelOnlyBulk, "rclone missing", "cannot run", "rclone v0.0.0-fake", `--config ""`} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}

	// One readable PNG per case.
	dir := t.TempDir()
	files, err := plot.Write(dir, rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(cases) {
		t.Errorf("%d plots, want %d", len(files), len(cases))
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil || img.Bounds().Dx() < 500 {
			t.Errorf("%s: %v, %v", f, err, img)
		}
	}
}

// TestNginxOrigin serves tiny cases from nginx: every byte checked, and its counters
// (access log and link) exact for the one-connection ceiling's probes.
func TestNginxOrigin(t *testing.T) {
	if _, err := exec.LookPath("nginx"); err != nil {
		if os.Getenv("PLAYHEAD_REQUIRE_NGINX") == "1" {
			t.Fatalf("nginx required but not found: %v", err)
		}
		t.Skipf("nginx not installed: %v", err)
	}
	cases, err := scenario.Cases([]string{"thumbs", "rewatch"}, tinySizes())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, cases, nil)
	cfg.Origin, cfg.Trials = OriginNginx, 1
	cfg.Systems = []System{{Info: report.System{Name: "playhead", Kind: report.KindSUT}, SUT: engineSUT{}}, HTTPOneConnSystem()}
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.Header.Origin, "nginx/") {
		t.Errorf("origin %q does not name nginx's version", rep.Header.Origin)
	}
	for _, c := range rep.Cases {
		if c.Failed() {
			t.Errorf("%s [%s] failed: %+v", c.Name, c.System, c.Trials)
		}
	}
	for _, c := range rep.Cases {
		if c.Failed() || c.NotApplicable != "" {
			continue
		}
		f := c.Trials[0].Figures
		switch {
		case c.Scenario == "thumbs" && c.System == "http 1 conn":
			if f[scenario.FigOriginBytes] != 3*2*64<<10 || f[scenario.FigOriginRequests] != 6 || f[scenario.FigNewConns] != 0 {
				t.Errorf("nginx counters for the probes: %v bytes, %v requests, %v new conns",
					f[scenario.FigOriginBytes], f[scenario.FigOriginRequests], f[scenario.FigNewConns])
			}
		case c.Scenario == "rewatch":
			if f[scenario.FigOriginBytes] != 0 {
				t.Errorf("rewatch from nginx: %v origin bytes on the second play", f[scenario.FigOriginBytes])
			}
		case c.Scenario == "thumbs":
			if f[scenario.FigOriginBytes] == 0 || f[scenario.FigOriginRequests] == 0 {
				t.Errorf("playhead thumbs from nginx: counters empty: %v", f)
			}
		}
	}
	var out bytes.Buffer
	report.Print(&out, rep)
	t.Log("\n" + out.String())
}

// TestPerPlayerCeilingGivesEachPlayerOneGET plays the streams case through the per-player
// ceiling: each player's file is one GET on a connection dialed before the count starts,
// and the other scenarios say why the column has no figures.
func TestPerPlayerCeilingGivesEachPlayerOneGET(t *testing.T) {
	sizes := tinySizes()
	cases, err := scenario.Cases([]string{"streams", "play"}, sizes)
	if err != nil {
		t.Fatal(err)
	}
	players := sizes.Streams[0].Players
	cfg := testConfig(t, cases, nil)
	cfg.Systems, cfg.Trials = []System{HTTPPerPlayerSystem()}, 1
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, c := range rep.Cases {
		if c.Scenario != "streams" {
			if c.NotApplicable == "" || len(c.Trials) != 0 {
				t.Errorf("%s: ran or has no reason: %+v", c.Name, c)
			}
			continue
		}
		if c.Failed() {
			t.Fatalf("%s failed: %+v %s", c.Name, c.Trials, c.Skipped)
		}
		ran++
		f := c.Trials[0].Figures
		if f[scenario.FigOriginRequests] != float64(players) || f[scenario.FigOriginBytes] != float64(int64(players)*sizes.StreamFile) ||
			f[scenario.FigNewConns] != 0 {
			t.Errorf("%s: %v requests, %v bytes, %v new conns; want %d GETs of the whole files on warm connections",
				c.Name, f[scenario.FigOriginRequests], f[scenario.FigOriginBytes], f[scenario.FigNewConns], players)
		}
	}
	if ran != 1 {
		t.Errorf("%d streams cases ran, want 1", ran)
	}
}
