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

	"gonum.org/v1/plot/vg"
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
		ls, err := Layouts(f)
		if err != nil {
			t.Fatal(err)
		}
		if ls[0].LegendPos != c.want {
			t.Errorf("y = %v: legend at %v, want %v", c.y, ls[0].LegendPos, c.want)
		}
		if len(ls[0].Problems) != 0 {
			t.Errorf("y = %v: problems %q", c.y, ls[0].Problems)
		}
	}
	if _, err := Layouts(Figure{Series: []Series{{X: x, Y: x}}, Legend: 9}); !errors.Is(err, ErrInvalid) {
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

// TestHeader: a title too wide for the panel is shrunk, then wrapped, and
// every line ends up no wider than the panel; a short one is left alone; the
// subtitle is wrapped too; the header band grows with the lines.
func TestHeader(t *testing.T) {
	long := "Asymptotic μ-GDP of E epochs of M rounds per unit √(E/M) against σ, with the ratio of the two coefficients and then some more words"
	width := PanelWidth - vg.Points(12)
	h := newHeader(long, long+" "+long, width)
	if len(h.title) < 2 || len(h.subtitle) < 3 {
		t.Errorf("title in %d lines, subtitle in %d, want ≥ 2 and ≥ 3", len(h.title), len(h.subtitle))
	}
	for _, l := range h.title {
		if w := h.titleStyle.Width(l); w > width {
			t.Errorf("title line %q is %.0f pt wide, panel %.0f pt", l, w.Points(), width.Points())
		}
	}
	for _, l := range h.subtitle {
		if w := h.subtitleStyle.Width(l); w > width {
			t.Errorf("subtitle line %q is %.0f pt wide, panel %.0f pt", l, w.Points(), width.Points())
		}
	}
	if got := strings.Join(h.title, " "); got != long {
		t.Errorf("wrapped title %q lost words of %q", got, long)
	}
	short := newHeader("short", "", width)
	if len(short.title) != 1 || short.title[0] != "short" || short.titleStyle.Font.Size != titleSize || short.height() >= h.height() {
		t.Errorf("short title: %q at %v, header %v (long: %v)", short.title, short.titleStyle.Font.Size, short.height(), h.height())
	}
	if newHeader("", "", width).height() != 0 {
		t.Error("no title, no subtitle: header band not empty")
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

// failingWriterTo writes some bytes, then fails.
type failingWriterTo struct{}

func (failingWriterTo) WriteTo(w io.Writer) (int64, error) {
	n, _ := w.Write([]byte("half a figure"))
	return int64(n), errors.New("renderer failed")
}

// TestWriteFileAtomic: a figure whose rendering fails leaves the earlier file as it was and
// no partial file behind; one that succeeds replaces it whole.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fig.svg")
	if err := os.WriteFile(path, []byte("old figure"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(path, failingWriterTo{}); err == nil || !strings.Contains(err.Error(), "renderer failed") {
		t.Fatalf("failing render: %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "old figure" {
		t.Errorf("after a failed write: %q, %v", b, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the directory after a failed write, want 1 (no temporary left)", len(ents))
	}
	if err := writeFile(path, strings.NewReader("new figure")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "new figure" {
		t.Errorf("after a write: %q, %v", b, err)
	}
}
