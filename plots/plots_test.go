package plots

import (
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

// checkFiles checks that pathNoExt.png decodes to w × h pixels and that
// pathNoExt.svg is well-formed XML whose text contains every name.
func checkFiles(t *testing.T, pathNoExt string, w, h int, names ...string) {
	t.Helper()
	fh, err := os.Open(pathNoExt + ".png")
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	img, err := png.Decode(fh)
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("PNG is %d × %d, want %d × %d", b.Dx(), b.Dy(), w, h)
	}
	// Not blank: some pixels are neither white nor fully transparent.
	inked := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r < 0xf000 || g < 0xf000 || bl < 0xf000 {
				inked++
			}
		}
	}
	if inked < 100 {
		t.Errorf("PNG nearly blank: %d inked samples", inked)
	}

	raw, err := os.ReadFile(pathNoExt + ".svg")
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(strings.NewReader(string(raw)))
	var text strings.Builder
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = v.Name.Local
			}
		case xml.CharData:
			text.Write(v)
		}
	}
	if root != "svg" {
		t.Errorf("SVG root element %q, want svg", root)
	}
	for _, n := range names {
		if !strings.Contains(text.String(), n) {
			t.Errorf("SVG text lacks %q", n)
		}
	}
}

func sampleFigure() Figure {
	x := make([]float64, 50)
	y1, y2 := make([]float64, 50), make([]float64, 50)
	for i := range x {
		x[i] = math.Pow(10, float64(i)/7)
		y1[i] = 1 / x[i]
		y2[i] = math.Exp(-float64(i) / 5)
	}
	return Figure{
		Title: "delta vs M", XLabel: "rounds M", YLabel: "delta",
		LogX: true, LogY: true,
		Series: []Series{
			{Name: "alpha curve", X: x, Y: y1},
			{Name: "beta curve", X: x, Y: y2, Style: Dashed, Points: true},
		},
	}
}

func TestSave(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fig")
	if err := sampleFigure().Save(path); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, path, 900, 600, "alpha curve", "beta curve", "delta vs M", "rounds M")
}

func TestSavePanels(t *testing.T) {
	a := sampleFigure()
	b := Figure{Title: "ratio", XLabel: "sigma", YLabel: "ratio",
		Series: []Series{{Name: "gamma ratio", X: []float64{0.5, 1, 1.668, 3}, Y: []float64{1.05, 1.12, 1.2071, 1.3}}}}
	path := filepath.Join(t.TempDir(), "panels")
	if err := SavePanels(path, a, b); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, path, 1800, 600, "alpha curve", "gamma ratio", "ratio")
}

// TestSkipsUndrawable: NaN, Inf and non-positive values on a log axis are
// skipped (the line breaks there) without error or panic; linear axes keep
// negative values; limits are honoured.
func TestSkipsUndrawable(t *testing.T) {
	x := []float64{1, 2, 3, 4, 5, 6, 7}
	y := []float64{1, math.NaN(), 0.1, -1, 0, math.Inf(1), 0.01}
	f := Figure{Title: "gaps", LogY: true, Series: []Series{
		{Name: "holes", X: x, Y: y},
		{Name: "single", X: []float64{3}, Y: []float64{0.5}},
	}, YLim: [2]float64{1e-3, 10}}
	path := filepath.Join(t.TempDir(), "gaps")
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, path, 900, 600, "holes", "single")
	lin := Figure{Series: []Series{{Name: "neg", X: x, Y: []float64{-3, -2, -1, 0, 1, 2, math.NaN()}}}}
	if err := lin.Save(filepath.Join(t.TempDir(), "lin")); err != nil {
		t.Fatal(err)
	}
	runs, err := f.Series[0].runs(false, true)
	if err != nil || len(runs) != 3 || len(runs[0]) != 1 || len(runs[1]) != 1 || len(runs[2]) != 1 {
		t.Errorf("runs = %v (%v), want three one-point runs", runs, err)
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	ok := Series{Name: "ok", X: []float64{1, 2}, Y: []float64{1, 2}}
	cases := map[string]Figure{
		"no series":       {},
		"length mismatch": {Series: []Series{ok, {Name: "bad", X: []float64{1, 2}, Y: []float64{1}}}},
		"only empty":      {Series: []Series{{Name: "bad"}}},
		"only NaN":        {Series: []Series{{Name: "bad", X: []float64{1}, Y: []float64{math.NaN()}}, {Name: "empty"}}},
		"all ≤ 0 on log":  {LogX: true, Series: []Series{{Name: "bad", X: []float64{0, -1}, Y: []float64{1, 2}}}},
		"bad style":       {Series: []Series{{Name: "bad", X: []float64{1}, Y: []float64{1}, Style: 7}}},
		"XLim reversed":   {Series: []Series{ok}, XLim: [2]float64{2, 1}},
		"YLim NaN":        {Series: []Series{ok}, YLim: [2]float64{0, math.NaN()}},
		"YLim 0 on log":   {LogY: true, Series: []Series{ok}, YLim: [2]float64{0, 1}},
	}
	for name, f := range cases {
		err := f.Save(filepath.Join(dir, "x"))
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
		if strings.Contains(name, "mismatch") && (err == nil || !strings.Contains(err.Error(), `"bad"`)) {
			t.Errorf("%s: error %v does not name the series", name, err)
		}
	}
	if err := SavePanels(filepath.Join(dir, "x")); !errors.Is(err, ErrInvalid) {
		t.Errorf("no panels: err = %v", err)
	}
	if err := (Figure{Series: []Series{ok}}).Save(""); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty path: err = %v", err)
	}
	if err := (Figure{Series: []Series{ok}}).Save(filepath.Join(dir, "missing", "x")); err == nil {
		t.Error("missing directory: no error")
	}
}

// TestLogTicks: labels at every power of ten in range, thinned past ten
// decades, 2× and 5× on narrow ranges, default ticks on very narrow ones.
func TestLogTicks(t *testing.T) {
	labels := func(lo, hi float64) []float64 {
		var out []float64
		for _, tk := range (logTicks{}).Ticks(lo, hi) {
			if tk.Value < lo*(1-1e-9) || tk.Value > hi*(1+1e-9) {
				t.Errorf("[%g, %g]: tick %g out of range", lo, hi, tk.Value)
			}
			if tk.Label != "" {
				out = append(out, tk.Value)
			}
		}
		return out
	}
	if got := labels(3e-6, 0.5); len(got) != 5 || got[0] != 1e-5 || got[4] != 0.1 {
		t.Errorf("[3e-6, 0.5]: labels %v, want 1e-5 … 0.1", got)
	}
	if got := labels(1e-300, 1); len(got) < 4 || len(got) > 11 {
		t.Errorf("[1e-300, 1]: %d labels, want 4–11", len(got))
	}
	if got := labels(0.5, 2); len(got) != 3 {
		t.Errorf("[0.5, 2]: labels %v, want 0.5, 1, 2", got)
	}
	if got := labels(1.1, 1.3); len(got) < 2 {
		t.Errorf("[1.1, 1.3]: labels %v, want at least two (default ticks)", got)
	}
	seen := map[string]bool{}
	for _, tk := range (linTicks{}).Ticks(1.03, 1.22) {
		if tk.Label != "" && seen[tk.Label] {
			t.Errorf("linear ticks on [1.03, 1.22]: label %q twice", tk.Label)
		}
		seen[tk.Label] = true
	}
	for v, want := range map[float64]string{1e-5: "1e-5", 0.01: "0.01", 1e6: "1e6", 1e4: "1e4", 2e-7: "2e-7", 1000: "1000", 1.0500000000000003: "1.05", 2.5e-12: "2.5e-12", 0: "0"} {
		if got := formatTick(v); got != want {
			t.Errorf("formatTick(%g) = %q, want %q", v, got, want)
		}
	}
}

// TestSkipsEmptySeries: a series with no drawable point is left out (not in
// the legend) while the others are drawn.
func TestSkipsEmptySeries(t *testing.T) {
	f := Figure{LogY: true, Series: []Series{
		{Name: "kept", X: []float64{1, 2}, Y: []float64{1, 2}},
		{Name: "vanished", X: []float64{1, 2}, Y: []float64{-1, math.NaN()}},
		{Name: "nothing"},
	}}
	path := filepath.Join(t.TempDir(), "skip")
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, path, 900, 600, "kept")
	raw, _ := os.ReadFile(path + ".svg")
	if strings.Contains(string(raw), "vanished") || strings.Contains(string(raw), "nothing") {
		t.Error("skipped series appear in the legend")
	}
}

// TestLegendAuto: the legend goes to the emptiest corner.
func TestLegendAuto(t *testing.T) {
	x := []float64{0, 0.25, 0.5, 0.75, 1}
	for _, c := range []struct {
		y    []float64
		want LegendPos
	}{
		{[]float64{1, 0.75, 0.5, 0.25, 0}, LegendTopRight}, // falling diagonal: top right empty
		{[]float64{0, 0.25, 0.5, 0.75, 1}, LegendTopLeft},  // rising diagonal
		{[]float64{1, 1, 1, 1, 1}, LegendBottomLeft},       // a line along the top
		{[]float64{0, 0.5, 1, 1, 1}, LegendTopLeft},        // a rise to a plateau
	} {
		f := Figure{Series: []Series{{Name: "a", X: x, Y: c.y}}, XLim: [2]float64{0, 1}, YLim: [2]float64{0, 1}}
		p, err := f.build()
		if err != nil {
			t.Fatal(err)
		}
		pos := LegendBottomRight
		switch {
		case p.Legend.Top && !p.Legend.Left:
			pos = LegendTopRight
		case p.Legend.Top:
			pos = LegendTopLeft
		case p.Legend.Left:
			pos = LegendBottomLeft
		}
		if pos != c.want {
			t.Errorf("y = %v: legend at %d, want %d", c.y, pos, c.want)
		}
	}
	if _, err := (Figure{Series: []Series{{X: x, Y: x}}, Legend: 9}).build(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Legend = 9: err = %v, want ErrInvalid", err)
	}
}

// TestColors: in order when no series sets Color, else by Color (mod 10).
func TestColors(t *testing.T) {
	for _, c := range []struct {
		explicit       bool
		i, color, want int
	}{
		{false, 0, 0, 0}, {false, 3, 0, 3}, {false, 12, 0, 2},
		{true, 0, 0, 0}, {true, 5, 2, 2}, {true, 1, 13, 3}, {true, 1, -1, 9},
	} {
		if got := colorIndex(c.explicit, c.i, c.color); got != c.want {
			t.Errorf("colorIndex(%v, %d, %d) = %d, want %d", c.explicit, c.i, c.color, got, c.want)
		}
	}
}

// TestFitTitle: a title too wide for the panel is shrunk, then wrapped, and
// ends up no wider than the panel; a short one is left alone.
func TestFitTitle(t *testing.T) {
	long := "van Dijk & Ertan Fig. 2 (left): asymptotic μ per unit c = √(E/M) — display only, not a bound, and then some more words"
	f := Figure{Title: long, Series: []Series{{Name: "s", X: []float64{0, 1}, Y: []float64{0, 1}}}}
	p, err := f.build()
	if err != nil {
		t.Fatal(err)
	}
	if w := p.Title.TextStyle.Width(p.Title.Text); w > PanelWidth {
		t.Errorf("title %.0f pt wide, panel %.0f pt", w.Points(), PanelWidth.Points())
	}
	if !strings.Contains(p.Title.Text, "\n") {
		t.Errorf("long title not wrapped: %q", p.Title.Text)
	}
	f.Title = "short"
	p, _ = f.build()
	if p.Title.Text != "short" || p.Title.TextStyle.Font.Size != plot.New().Title.TextStyle.Font.Size {
		t.Errorf("short title changed: %q at %v", p.Title.Text, p.Title.TextStyle.Font.Size)
	}
}

func BenchmarkSave(b *testing.B) {
	f := sampleFigure()
	path := filepath.Join(b.TempDir(), "bench")
	for b.Loop() {
		if err := f.Save(path); err != nil {
			b.Fatal(err)
		}
	}
}
