package plot

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/playhead/playhead/bench/report"
	"github.com/playhead/playhead/bench/scenario"
)

// TestWriteMarksFreezesAndSkipsSystemsWithoutReads draws a two-system case where one
// system froze, and a case nobody read (no file).
func TestWriteMarksFreezesAndSkipsSystemsWithoutReads(t *testing.T) {
	reads := func(freezeAt int) []scenario.Read {
		var rs []scenario.Read
		for i := range 100 {
			rs = append(rs, scenario.Read{At: float64(i) * 0.1, Latency: 0.0002, Freeze: i == freezeAt})
		}
		rs[0].Latency = 0.2
		return rs
	}
	r := &report.Report{
		Header: report.Header{Systems: []report.System{{Name: "a", Kind: report.KindSUT}, {Name: "b", Kind: report.KindSUT},
			{Name: "c", Kind: report.KindCeiling}}},
		Cases: []report.CaseResult{
			{Name: "play 3MB/s", System: "a", Trials: []report.Trial{{Trial: 1, Reads: reads(50),
				Figures: scenario.Figures{scenario.FigFreezes: 1, scenario.FigWorstStall: 0.3}}}},
			{Name: "play 3MB/s", System: "b", Trials: []report.Trial{{Trial: 1, Reads: reads(-1)}}},
			{Name: "play 3MB/s", System: "c", NotApplicable: "no"},
			{Name: "bulk 1GiB", System: "a", Skipped: "cannot"},
		},
	}
	dir := t.TempDir()
	files, err := Write(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || filepath.Base(files[0]) != "play-3MBps.png" {
		t.Fatalf("files %v, want play-3MBps.png alone", files)
	}
	f, err := os.Open(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// Two panels under a title.
	if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 2*int(panelHeight.Dots(dpi)) {
		t.Errorf("image %v too small for two panels", b)
	}
	if got := summary(scenario.Figures{scenario.FigFreezes: 1}); got != "1 freeze" {
		t.Errorf("summary %q", got)
	}
}
