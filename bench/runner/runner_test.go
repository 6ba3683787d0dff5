package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/bench/report"
	"github.com/playhead/playhead/bench/scenario"
)

// copySUT is the simplest fake system under test: its "mount" downloads every file from
// the origin into the cache directory and serves them from there, before the runner
// starts counting. It can corrupt a file and refuse to mount.
type copySUT struct {
	paths   []string // origin paths to download
	corrupt string   // if set, this path's byte 1000 is flipped
	failAll bool     // every mount fails
	mounts  int
}

func (s *copySUT) Mount(ctx context.Context, req MountRequest) (Mounted, error) {
	s.mounts++
	if s.failAll {
		return nil, errors.New("fake: mount refused")
	}
	root := filepath.Join(req.CacheDir, "files")
	for _, p := range s.paths {
		dst := filepath.Join(root, filepath.FromSlash(p))
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		if err := download(ctx, req.OriginURL+p, dst, p == s.corrupt); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(req.ReadyFile))); err != nil {
		return nil, fmt.Errorf("fake: not ready: %w", err)
	}
	return &copyMount{dir: root}, nil
}

func download(ctx context.Context, url, dst string, corrupt bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fake: GET %s: %s", url, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if corrupt {
		data[1000] ^= 0xff
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

type copyMount struct{ dir string }

func (m *copyMount) FS() fs.FS                   { return os.DirFS(m.dir) }
func (m *copyMount) Dir() string                 { return m.dir }
func (m *copyMount) PeakRSS() (int64, error)     { return 10 << 20, nil }
func (m *copyMount) CPU() (time.Duration, error) { return 25 * time.Millisecond, nil }
func (m *copyMount) Unmount() error              { return nil }

// tinySizes shrink every scenario to a fraction of a second.
func tinySizes() scenario.Sizes {
	return scenario.Sizes{
		PlayFile: 600_000, PlayRates: []int64{3_000_000, 20_000_000},
		SeekFile: 2_000_000, Seeks: 3, SeekPlay: 300_000, SeekRate: 3_000_000, SeekSeed: 1,
		ThumbFiles: 3, ThumbFile: 500_000, ThumbProbe: 64 << 10,
		BulkFile: 3 << 20, BulkRead: 1 << 20,
		Streams: []scenario.StreamSet{{Players: 2, Rate: 3_000_000}}, StreamFile: 400_000,
		ShuffledFile: 2 << 20, ShuffledRate: 20_000_000, ShuffledThreads: 4, ShuffledPiece: 128 << 10,
		ShuffledWindow: 8, ShuffledSeed: 1,
		RewatchFile: 400_000, RewatchRate: 3_000_000,
	}
}

func fakeFor(cases []scenario.Case) *copySUT {
	s := &copySUT{}
	for _, c := range cases {
		for p := range c.Files {
			s.paths = append(s.paths, p)
		}
	}
	return s
}

func testConfig(t *testing.T, cases []scenario.Case, sut SUT) Config {
	return Config{
		SUT: sut, Cases: cases, Link: "loopback", Trials: 2,
		TempDir: t.TempDir(), Warm: -1, ProbeBytes: 1 << 20,
		PageCacheNote: "not dropped (test)",
	}
}

// TestRunAllScenariosOnEngine runs tiny versions of every scenario end to end (origin,
// link, mounts, scenarios, counters, report) on playhead's engine without FUSE.
//
// players is not among them: a real player opens files by path and the engine is no
// directory. TestPlayersThroughRunner runs it.
func TestRunAllScenariosOnEngine(t *testing.T) {
	names := slices.DeleteFunc(slices.Clone(scenario.Names), func(n string) bool { return n == "players" })
	cases, err := scenario.Cases(names, tinySizes())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(t.Context(), testConfig(t, cases, engineSUT{}))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := report.Print(&out, rep); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())

	if len(rep.Cases) != len(cases) {
		t.Fatalf("%d case results, want %d", len(rep.Cases), len(cases))
	}
	for _, c := range rep.Cases {
		if c.Failed() {
			t.Errorf("%s failed: %+v", c.Name, c.Trials)
			continue
		}
		for _, key := range []string{scenario.FigBytesRead, scenario.FigThroughput, scenario.FigReadP99,
			scenario.FigOriginBytes, scenario.FigOriginRequests, scenario.FigNewConns, scenario.FigWaste,
			scenario.FigPeakRSS, scenario.FigCPU} {
			if st := c.Aggregate(key); st.N != 2 {
				t.Errorf("%s: %s in %d trials, want 2", c.Name, key, st.N)
			}
		}
		if got := c.Aggregate(scenario.FigPeakRSS).Median; got != 10<<20 {
			t.Errorf("%s: peak RSS %v, want what the SUT reported", c.Name, got)
		}
		orig := c.Aggregate(scenario.FigOriginBytes)
		switch c.Scenario {
		case "rewatch":
			// The second mount reads the first one's cache: the origin sends nothing.
			if orig.Max != 0 {
				t.Errorf("%s: origin sent %v bytes on the second play, want 0", c.Name, orig.Max)
			}
		case "thumbs":
			if got := c.Aggregate(scenario.FigFiles).Median; got != 3 {
				t.Errorf("%s: %v files, want 3", c.Name, got)
			}
			if c.Aggregate(scenario.FigOriginBytesPerFile).N != 2 || c.Aggregate(scenario.FigFileMax).N != 2 {
				t.Errorf("%s: per-file figures missing", c.Name)
			}
		case "bulk":
			// A cold whole-file read fetches the file, give or take a block of read-ahead.
			if w := c.Aggregate(scenario.FigWaste); w.Min < 1 || w.Max > 1.5 {
				t.Errorf("%s: waste %+v, want about 1", c.Name, w)
			}
			if c.Aggregate(scenario.FigCachedThroughput).N != 2 {
				t.Errorf("%s: no cached throughput", c.Name)
			}
		case "seek":
			if c.Aggregate(scenario.FigSeekTTFMax).N != 2 {
				t.Errorf("%s: no time to first 256 KiB", c.Name)
			}
		}
		if c.Scenario != "rewatch" && orig.Min == 0 {
			t.Errorf("%s: the origin sent nothing on a fresh cache", c.Name)
		}
	}
	for _, want := range []string{"play 3MB/s", "shuffled 4 threads 20MB/s", "rewatch 3MB/s", "time per file", "[", "–"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}

	// The JSON has every trial.
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	if err := report.WriteJSON(jsonPath, rep); err != nil {
		t.Fatal(err)
	}
	var back report.Report
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Cases) != len(cases) || len(back.Cases[0].Trials) != 2 || back.Header.Link != "loopback" {
		t.Errorf("JSON round trip lost trials or header: %d cases", len(back.Cases))
	}
}

// TestMismatchStopsTheRun: wrong bytes end the run with a MismatchError, loudly.
func TestMismatchStopsTheRun(t *testing.T) {
	cases, err := scenario.Cases([]string{"thumbs", "bulk"}, tinySizes())
	if err != nil {
		t.Fatal(err)
	}
	sut := fakeFor(cases)
	sut.corrupt = "thumbs/thumbs-001.mkv"
	rep, err := Run(t.Context(), testConfig(t, cases, sut))
	if !scenario.IsMismatch(err) {
		t.Fatalf("err %v, want a mismatch", err)
	}
	if !strings.Contains(err.Error(), "thumbs-001.mkv") || !strings.Contains(err.Error(), "offset 1000") {
		t.Errorf("error does not name the file and offset: %v", err)
	}
	// thumbs runs first and stops at its first trial; bulk is reported as not run.
	if rep == nil || len(rep.Cases) != 2 || len(rep.Cases[0].Trials) != 1 || rep.Cases[0].Trials[0].Error == "" ||
		!strings.Contains(rep.Cases[1].Skipped, "DATA MISMATCH") {
		t.Errorf("the report does not end at the failed trial: %+v", rep)
	}
}

// TestFailedMountIsReported: a system that cannot mount fails each trial with its
// reason; the run goes on and the report says so.
func TestFailedMountIsReported(t *testing.T) {
	cases, err := scenario.Cases([]string{"bulk", "rewatch"}, tinySizes())
	if err != nil {
		t.Fatal(err)
	}
	sut := &copySUT{failAll: true}
	rep, err := Run(t.Context(), testConfig(t, cases, sut))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	report.Print(&out, rep)
	for _, c := range rep.Cases {
		if !c.Failed() || len(c.Trials) != 2 {
			t.Errorf("%s: %+v, want 2 failed trials", c.Name, c)
		}
	}
	if !strings.Contains(out.String(), "FAILURES") || !strings.Contains(out.String(), "fake: mount refused") {
		t.Errorf("report does not give the reason:\n%s", out.String())
	}
}

func TestCheckLinkKnowsBothKinds(t *testing.T) {
	for _, name := range []string{"far", "cloud", "lan", "loopback", "far-shared", "cloud-kernel"} {
		if err := CheckLink(name); err != nil {
			t.Errorf("CheckLink(%q): %v", name, err)
		}
	}
	if err := CheckLink("moon"); err == nil || !strings.Contains(err.Error(), "far-shared") {
		t.Errorf("CheckLink(moon) = %v, want an error listing the kernel-shaped profiles too", err)
	}
	if !sharedPipe("far-shared") || sharedPipe("cloud-kernel") {
		t.Error("sharedPipe: far-shared shares one pipe, cloud-kernel does not")
	}
}

// TestRunOnKernelLink runs the tiny bulk case over far-shared: the mount's reads cross
// the namespace, and the trial reports what the origin's end of the link sent.
func TestRunOnKernelLink(t *testing.T) {
	all, err := scenario.Cases([]string{"bulk"}, tinySizes())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, all, engineSUT{})
	cfg.Link, cfg.Trials = "far-shared", 1
	rep, err := Run(t.Context(), cfg)
	if err != nil && strings.Contains(err.Error(), "needs root and tc tbf") {
		if os.Getenv("PLAYHEAD_REQUIRE_NETNS") == "1" {
			t.Fatalf("PLAYHEAD_REQUIRE_NETNS=1 but: %v", err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.Header.LinkOptions, "kernel-shaped") || rep.Header.ProbeRTT < 0.2 {
		t.Errorf("header: link %q, probe rtt %.3fs; want the kernel-shaped link's 200 ms", rep.Header.LinkOptions, rep.Header.ProbeRTT)
	}
	if len(rep.Cases) == 0 || len(rep.Cases[0].Trials) != 1 || rep.Cases[0].Trials[0].Error != "" {
		t.Fatalf("cases: %+v", rep.Cases)
	}
	figs := rep.Cases[0].Trials[0].Figures
	body, wire := figs[scenario.FigOriginBytes], figs[scenario.FigOriginWireBytes]
	if body <= 0 || wire < body || wire > body*1.2 {
		t.Errorf("origin sent %.0f body bytes and %.0f on the wire; want the wire a little more", body, wire)
	}
}

// TestCaseUnavailableIsReported: a case that cannot run here (its player is missing) is
// reported with its reason, and the run goes on.
func TestCaseUnavailableIsReported(t *testing.T) {
	cases, err := scenario.Cases([]string{"bulk"}, tinySizes())
	if err != nil {
		t.Fatal(err)
	}
	cases = append([]scenario.Case{{Scenario: "players", Name: "players ffmpeg mp4", Unavailable: "no ffmpeg here"}}, cases...)
	rep, err := Run(t.Context(), testConfig(t, cases, fakeFor(cases)))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cases[0].Skipped != "no ffmpeg here" || rep.Cases[1].Failed() {
		t.Errorf("cases %+v", rep.Cases)
	}
}

// TestPlayersThroughRunner runs the players scenario with the real ffmpeg on tiny media,
// served from disk by the built-in origin through the link to the copying fake, and from
// the local-disk ceiling: the players' output on both must equal their output on the
// generated files.
func TestPlayersThroughRunner(t *testing.T) {
	_, err1 := exec.LookPath("ffmpeg")
	_, err2 := exec.LookPath("ffprobe")
	if err1 != nil || err2 != nil {
		if os.Getenv("PLAYHEAD_REQUIRE_FFMPEG") == "1" {
			t.Fatalf("PLAYHEAD_REQUIRE_FFMPEG=1 and ffmpeg or ffprobe is missing: %v, %v", err1, err2)
		}
		t.Skip("ffmpeg is not installed (make bench-deps installs it)")
	}
	sizes := tinySizes()
	sizes.Players = scenario.PlayersConfig{MediaDir: t.TempDir(), Media: scenario.MediaSpec{
		Seconds: 60, Size: "160x90", Bitrate: "200k", LibraryFiles: 2, LibrarySeconds: 10}}
	cases, err := scenario.Cases([]string{"players"}, sizes)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, cases, nil)
	cfg.Trials = 1
	cfg.Systems = []System{{Info: report.System{Name: "copy", Kind: report.KindSUT}, SUT: fakeFor(cases)}, LocalDiskSystem()}
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	report.Print(&out, rep)
	t.Log("\n" + out.String())
	if len(rep.Cases) != 8 {
		t.Fatalf("%d case results, want 4 cases on 2 systems", len(rep.Cases))
	}
	for _, c := range rep.Cases {
		if c.Failed() {
			t.Errorf("%s [%s] failed: %+v %s", c.Name, c.System, c.Trials, c.Skipped)
			continue
		}
		for _, key := range []string{scenario.FigStartup, scenario.FigBytesRead} {
			if st := c.Aggregate(key); st.N != 1 || st.Median <= 0 {
				t.Errorf("%s [%s]: %s %+v", c.Name, c.System, key, st)
			}
		}
	}
	for _, want := range []string{"players ffprobe 2 files", "ffmpeg -ss 30 then: time to first frame"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
