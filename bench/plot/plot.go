// Package plot draws `playhead bench run --plot DIR`: one PNG per case, read latency
// over time, one panel per system stacked on shared axes, freezes marked.
//
// Design notes and traps:
//   - It draws from a report.Report alone (the reads each trial recorded), so a JSON
//     report written earlier can be plotted again.
//   - Each panel is one trial: the first successful one of its system. Medians are in
//     the table; a plot shows what one run looked like, stalls and all.
//   - Latency spans four orders of magnitude (a page-cache hit against a round trip), so
//     the y axis is logarithmic; a read faster than latencyFloor is drawn at the floor.
//   - Panels share both axes so systems compare by eye; a system with no reads (cannot
//     run, not applicable, failed) gets no panel and the title says so.
package plot

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/playhead/playhead/bench/play"
	"github.com/playhead/playhead/bench/report"
	"github.com/playhead/playhead/bench/scenario"
)

// Drawing constants.
const (
	// latencyFloor is the lowest latency drawn (seconds): a log axis has no zero, and
	// below 10 µs every read is a memory copy.
	latencyFloor = 10e-6
	width        = 26 * vg.Centimeter
	panelHeight  = 6 * vg.Centimeter
	titleHeight  = 1.2 * vg.Centimeter
	dpi          = 110
)

var (
	readColor   = color.RGBA{R: 40, G: 90, B: 180, A: 255}
	freezeColor = color.RGBA{R: 220, G: 30, B: 30, A: 255}
)

// Write draws a PNG per case of r into dir (created if needed) and returns the files.
func Write(dir string, r *report.Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, name := range caseNames(r) {
		path := filepath.Join(dir, fileName(name))
		ok, err := writeCase(path, name, r)
		if err != nil {
			return written, fmt.Errorf("plot %s: %w", name, err)
		}
		if ok {
			written = append(written, path)
		}
	}
	return written, nil
}

// panel is one system's trial to draw.
type panel struct {
	system string
	trial  report.Trial
}

// writeCase draws case name; false when no system recorded reads for it.
func writeCase(path, name string, r *report.Report) (bool, error) {
	var panels []panel
	var missing []string
	for _, sys := range systems(r) {
		t, ok := firstWithReads(r, name, sys)
		if !ok {
			missing = append(missing, sys)
			continue
		}
		panels = append(panels, panel{sys, t})
	}
	if len(panels) == 0 {
		return false, nil
	}
	xmax, ymin, ymax := 0.0, math.Inf(1), 0.0
	for _, p := range panels {
		for _, rd := range p.trial.Reads {
			xmax = max(xmax, rd.At)
			ymin = min(ymin, max(rd.Latency, latencyFloor))
			ymax = max(ymax, max(rd.Latency, latencyFloor))
		}
	}
	// Whole decades, so the log axis has ticks at both ends.
	ymin = math.Pow(10, math.Floor(math.Log10(ymin)))
	ymax = math.Pow(10, math.Ceil(math.Log10(ymax*1.01)))

	plots := make([][]*gplot.Plot, len(panels))
	for i, p := range panels {
		pl, err := drawPanel(p, xmax, ymin, ymax, i == len(panels)-1)
		if err != nil {
			return false, err
		}
		plots[i] = []*gplot.Plot{pl}
	}

	height := titleHeight + panelHeight*vg.Length(len(panels))
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	title := fmt.Sprintf("%s: read latency over time, one trial per system (red x: a read done over %v after it was due)",
		name, play.DefaultFreezeThreshold)
	if len(missing) > 0 {
		title += "; no reads from " + strings.Join(missing, ", ")
	}
	font := gplot.DefaultFont
	font.Size = vg.Points(12)
	sty := draw.TextStyle{Color: color.Black, Font: font,
		XAlign: draw.XCenter, YAlign: draw.YCenter, Handler: gplot.DefaultTextHandler}
	dc.FillText(sty, vg.Point{X: width / 2, Y: height - titleHeight/2}, title)
	body := draw.Crop(dc, 0, 0, 0, -titleHeight)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Millimeter, PadLeft: 2 * vg.Millimeter,
		PadRight: 4 * vg.Millimeter, PadBottom: 2 * vg.Millimeter}
	canvases := gplot.Align(plots, tiles, body)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}

	f, err := os.Create(path)
	if err != nil {
		return false, err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return false, err
	}
	return true, f.Close()
}

// drawPanel is one system's read latencies over time.
func drawPanel(p panel, xmax, ymin, ymax float64, last bool) (*gplot.Plot, error) {
	pl := gplot.New()
	figs := p.trial.Figures
	pl.Title.Text = fmt.Sprintf("%s (trial %d): %d reads, %s", p.system, p.trial.Trial, len(p.trial.Reads), summary(figs))
	pl.Title.TextStyle.Font.Size = vg.Points(10)
	pl.Y.Label.Text = "read latency (s)"
	pl.Y.Scale = gplot.LogScale{}
	pl.Y.Tick.Marker = gplot.LogTicks{Prec: -1}
	pl.Y.Min, pl.Y.Max = ymin, ymax
	pl.X.Min, pl.X.Max = 0, max(xmax*1.02, 0.001)
	if last {
		pl.X.Label.Text = "time since the scenario began reading (s)"
	}
	pl.Add(plotter.NewGrid())

	var reads, freezes plotter.XYs
	for _, rd := range p.trial.Reads {
		pt := plotter.XY{X: rd.At, Y: max(rd.Latency, latencyFloor)}
		if rd.Freeze {
			freezes = append(freezes, pt)
		} else {
			reads = append(reads, pt)
		}
	}
	if len(reads) > 0 {
		s, err := plotter.NewScatter(reads)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: readColor, Radius: vg.Points(1.2), Shape: draw.CircleGlyph{}}
		pl.Add(s)
		pl.Legend.Add("read", s)
	}
	if len(freezes) > 0 {
		s, err := plotter.NewScatter(freezes)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: freezeColor, Radius: vg.Points(4), Shape: draw.CrossGlyph{}}
		pl.Add(s)
		pl.Legend.Add(fmt.Sprintf("freeze (%d)", len(freezes)), s)
	}
	pl.Legend.Top = true
	return pl, nil
}

// summary names the figures a reader checks a panel against.
func summary(f scenario.Figures) string {
	var parts []string
	if v, ok := f[scenario.FigFreezes]; ok {
		parts = append(parts, plural(v, "freeze"))
	}
	if v, ok := f[scenario.FigWorstStall]; ok && v > 0 {
		parts = append(parts, fmt.Sprintf("worst stall %.0f ms", v*1e3))
	}
	if v, ok := f[scenario.FigReadP99]; ok {
		parts = append(parts, fmt.Sprintf("p99 %.1f ms", v*1e3))
	}
	if v, ok := f[scenario.FigThroughput]; ok {
		parts = append(parts, fmt.Sprintf("%.1f MB/s", v/1e6))
	}
	return strings.Join(parts, ", ")
}

// systems are the report's systems in column order ("" for a report of playhead alone).
func systems(r *report.Report) []string {
	if len(r.Header.Systems) == 0 {
		return []string{""}
	}
	var names []string
	for _, s := range r.Header.Systems {
		names = append(names, s.Name)
	}
	return names
}

func caseNames(r *report.Report) []string {
	var names []string
	seen := map[string]bool{}
	for _, c := range r.Cases {
		if !seen[c.Name] {
			seen[c.Name] = true
			names = append(names, c.Name)
		}
	}
	return names
}

// firstWithReads is the first successful trial of case name on system sys with reads.
func firstWithReads(r *report.Report, name, sys string) (report.Trial, bool) {
	for _, c := range r.Cases {
		if c.Name != name || (sys != "" && c.System != sys) {
			continue
		}
		for _, t := range c.OK() {
			if len(t.Reads) > 0 {
				return t, true
			}
		}
	}
	return report.Trial{}, false
}

// fileName makes a case name a file name: "play 3MB/s" -> "play-3MBps.png".
func fileName(name string) string {
	r := strings.NewReplacer("/s", "ps", "/", "-", " ", "-")
	return r.Replace(name) + ".png"
}

// plural prints a count with its noun: "1 freeze", "3 freezes".
func plural(n float64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%.0f %ss", n, noun)
}
