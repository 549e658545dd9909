package plots

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// line returns n points of y = f(x) for x evenly spaced in [lo, hi].
func line(lo, hi float64, n int, f func(float64) float64) (xs, ys []float64) {
	for i := range n {
		x := lo + (hi-lo)*float64(i)/float64(n-1)
		xs, ys = append(xs, x), append(ys, f(x))
	}
	return xs, ys
}

// build1 lays f out as one panel.
func build1(t *testing.T, f Figure) (*panel, Layout) {
	t.Helper()
	p, err := f.build(PanelWidth)
	if err != nil {
		t.Fatal(err)
	}
	return p, p.layout
}

// noted reports whether a legend entry says that lines coincide.
func noted(l Layout) bool {
	for _, e := range l.Legend {
		if strings.Contains(e, "coincide") || strings.Contains(e, "lies") {
			return true
		}
	}
	return false
}

// TestCoincide: a line drawn over an identical one is found, drawn so that
// the lower one shows (alternating dashes over another colour, marks over
// the same colour), and the legend says so; lines apart, or only meeting
// at one end, are not.
func TestCoincide(t *testing.T) {
	x, y := line(1, 30, 30, func(x float64) float64 { return math.Sqrt(x) })
	_, y2 := line(1, 30, 30, func(x float64) float64 { return 1.5 * math.Sqrt(x) })
	_, yMeet := line(1, 30, 30, func(x float64) float64 { return math.Sqrt(x) * (1 + (30-x)/30) })

	t.Run("other colour", func(t *testing.T) {
		f := Figure{Title: "t", LogY: true, Series: []Series{
			{Name: "poisson", X: x, Y: y}, {Name: "other", X: x, Y: y2}, {Name: "as if poisson", X: x, Y: y},
		}}
		p, l := build1(t, f)
		if !slices.Equal(l.Coincide, []Coincidence{{Under: 0, Over: 2}}) {
			t.Fatalf("Coincide = %v, want [{0 2}]", l.Coincide)
		}
		if l.Legend[0] != "poisson — coincides with as if poisson" {
			t.Errorf("legend %q does not say that poisson lies under as if poisson", l.Legend)
		}
		if len(p.ds) != 3 || len(p.ds[2].line.Dashes) == 0 || len(p.ds[0].line.Dashes) != 0 || len(p.ds[2].thumb.Dashes) != 0 {
			t.Errorf("upper line not dashed over the lower one, or its legend line dashed too")
		}
		if len(l.Problems) != 0 {
			t.Errorf("problems: %q", l.Problems)
		}
	})
	t.Run("same colour", func(t *testing.T) {
		f := Figure{Title: "t", Series: []Series{
			{Name: "a", X: x, Y: y, Color: 3}, {X: x, Y: y, Color: 3, Style: Dashed},
		}}
		p, l := build1(t, f)
		if len(l.Coincide) != 1 || l.Legend[0] != "a — two of its lines coincide" {
			t.Errorf("Coincide %v, legend %q", l.Coincide, l.Legend)
		}
		if !p.ds[1].marks || p.ds[0].marks {
			t.Error("no marks on the upper line of the same colour")
		}
	})
	t.Run("same style", func(t *testing.T) {
		f := Figure{Title: "t", Series: []Series{
			{Name: "a", X: x, Y: y, Color: 2}, {Name: "b", X: x, Y: y2, Color: 4}, {Name: "c", X: x, Y: y, Color: 2},
		}}
		p, l := build1(t, f)
		if !slices.Equal(l.Coincide, []Coincidence{{Under: 0, Over: 2}}) || l.Legend[0] != "a — coincides with c" {
			t.Errorf("Coincide %v, legend %q", l.Coincide, l.Legend)
		}
		if !p.ds[2].marks || p.ds[0].marks || p.ds[1].marks {
			t.Error("identical lines: no marks on the upper one, or marks elsewhere")
		}
	})
	t.Run("key styles", func(t *testing.T) {
		f := Figure{Title: "t", Key: []KeyEntry{{Name: "bound", Style: Solid}}, Series: []Series{
			{Name: "σ = 0.75", X: x, Y: y, Color: 1}, {Name: "σ = 1.5", X: x, Y: y, Color: 3},
		}}
		_, l := build1(t, f)
		if l.Legend[0] != "σ = 0.75 — solid line coincides with σ = 1.5's" || l.Legend[2] != "bound" {
			t.Errorf("legend %q", l.Legend)
		}
	})
	t.Run("apart", func(t *testing.T) {
		for _, other := range [][]float64{y2, yMeet} {
			f := Figure{Title: "t", Series: []Series{{Name: "a", X: x, Y: y}, {Name: "b", X: x, Y: other}}}
			_, l := build1(t, f)
			if len(l.Coincide) != 0 || noted(l) {
				t.Errorf("Coincide = %v, legend %q, want none", l.Coincide, l.Legend)
			}
		}
	})
}

// TestLegendClearsData: with lines in all four corners the legend still
// hides none of them (the y axis makes room); with the y range fixed it
// cannot, and Layout says so.
func TestLegendClearsData(t *testing.T) {
	var ss []Series
	for k, c := range []float64{0.02, 0.3, 0.6, 0.98} {
		x, y := line(0, 1, 50, func(x float64) float64 { return c + 0.01*math.Sin(10*x) })
		ss = append(ss, Series{Name: "a line with a long name " + strings.Repeat("x", k), X: x, Y: y})
	}
	_, l := build1(t, Figure{Title: "t", Series: ss})
	if len(l.Problems) != 0 {
		t.Errorf("problems: %q", l.Problems)
	}
	_, l = build1(t, Figure{Title: "t", Series: ss, YLim: [2]float64{0, 1}})
	if len(l.Problems) == 0 || !strings.Contains(l.Problems[0], "legend") {
		t.Errorf("fixed y range: problems %q, want the legend over data", l.Problems)
	}
	// Log axes too.
	for i := range ss {
		for k := range ss[i].Y {
			ss[i].Y[k] = math.Pow(10, 6*ss[i].Y[k])
		}
	}
	_, l = build1(t, Figure{Title: "t", Series: ss, LogY: true})
	if len(l.Problems) != 0 {
		t.Errorf("log y: problems: %q", l.Problems)
	}
}

// TestLegendGivesWay: an asked-for corner is kept while the legend can
// clear the data there, and given up for a free one when it cannot.
func TestLegendGivesWay(t *testing.T) {
	x, y := line(0, 1, 20, func(x float64) float64 { return 1 - x })
	for _, c := range []struct {
		ylim [2]float64
		want LegendPos
	}{
		{[2]float64{}, LegendTopLeft},             // room made above the falling line
		{[2]float64{-0.03, 1.03}, LegendTopRight}, // fixed range: the first free corner
	} {
		_, l := build1(t, Figure{Title: "t", Series: []Series{{Name: "falling", X: x, Y: y}}, Legend: LegendTopLeft, XLim: [2]float64{-0.03, 1.03}, YLim: c.ylim})
		if l.LegendPos != c.want || len(l.Problems) != 0 {
			t.Errorf("YLim %v: legend at %v (problems %q), want %v", c.ylim, l.LegendPos, l.Problems, c.want)
		}
	}
}

// TestLayoutProblems: a legend entry twice is a problem.
func TestLayoutProblems(t *testing.T) {
	x, y := line(0, 1, 5, func(x float64) float64 { return x })
	_, y2 := line(0, 1, 5, func(x float64) float64 { return 1 - x })
	_, l := build1(t, Figure{Title: "t", Series: []Series{{Name: "a", X: x, Y: y}, {Name: "a", X: x, Y: y2}}})
	if len(l.Problems) != 1 || !strings.Contains(l.Problems[0], `"a" appears twice`) {
		t.Errorf("problems %q, want the legend entry twice", l.Problems)
	}
}

// TestTicksReadable: over random ranges and axis lengths, linear and log,
// the chosen ticks lie in range, at least two carry labels, the labels are
// distinct, non-empty, in order and do not crowd each other, as long as
// the axis is long enough for two labels.
func TestTicksReadable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		log := rng.IntN(2) == 0
		var lo, hi float64
		if log {
			lo = math.Pow(10, rng.Float64()*60-30)
			hi = lo * math.Pow(10, rng.Float64()*rng.Float64()*40+1e-3)
		} else {
			// Spans from a millionth of the values to a million times them.
			lo = (rng.Float64() - 0.5) * math.Pow(10, rng.Float64()*12-6)
			hi = lo + math.Abs(lo)*math.Pow(10, rng.Float64()*12-6) + 1e-300
		}
		ax := plot.New().X
		ax.Tick.Label.Handler = powText{text.Plain{Fonts: font.DefaultCache}}
		ax.Min, ax.Max = toAxis(lo, log), toAxis(hi, log)
		horizontal := rng.IntN(2) == 0
		length := vg.Points(120 + rng.Float64()*300)
		chooseTicks(&ax, length, horizontal, log)
		onAxis := ax.Tick.Marker.Ticks(ax.Min, ax.Max)
		crowd := crowded(&ax, labelled(onAxis), length, horizontal)
		ts := slices.Clone(onAxis)
		for i := range ts {
			ts[i].Value = fromAxis(ts[i].Value, log)
		}
		ls := labelled(ts)
		if len(ls) < 2 {
			t.Errorf("[%g, %g] log=%v: %d labels", lo, hi, log, len(ls))
			continue
		}
		for _, tk := range ts {
			if tk.Value < lo-1e-9*math.Abs(lo) || tk.Value > hi+1e-9*math.Abs(hi) {
				t.Errorf("[%g, %g] log=%v: tick %g out of range", lo, hi, log, tk.Value)
			}
		}
		seen := map[string]bool{}
		for i, tk := range ls {
			if strings.TrimSpace(tk.Label) == "" || seen[tk.Label] {
				t.Errorf("[%g, %g] log=%v: label %q empty or twice", lo, hi, log, tk.Label)
			}
			seen[tk.Label] = true
			if i > 0 && !(tk.Value > ls[i-1].Value) {
				t.Errorf("[%g, %g] log=%v: labels out of order", lo, hi, log)
			}
		}
		// Two labels fit on any axis this long.
		if len(crowd) > 0 {
			t.Errorf("[%g, %g] log=%v, %.0f pt, horizontal=%v: labels crowd: %q", lo, hi, log, length.Points(), horizontal, crowd)
		}
	}
}

// TestTickSets: the candidate sets for ranges a reader meets.
func TestTickSets(t *testing.T) {
	first := func(lo, hi float64, log bool) []string {
		var out []string
		for _, tk := range labelled(tickSets(lo, hi, log)[0]) {
			out = append(out, tk.Label)
		}
		return out
	}
	for _, c := range []struct {
		lo, hi float64
		log    bool
		want   []string
	}{
		{3e-6, 0.5, true, []string{"10^−5", "10^−4", "0.001", "0.01", "0.1"}}, // 1-2-5 would give 15 labels
		{0.5, 2, true, []string{"0.5", "1", "2"}},
		{1.1, 1.3, true, nil}, // too narrow for 1, 2, 5 × 10ᵏ: linear labels
		{-0.03, 1.03, false, []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}},
		{0.13, 30.87, false, []string{"5", "10", "15", "20", "25", "30"}},
	} {
		got := first(c.lo, c.hi, c.log)
		if len(c.want) > 0 && !slices.Equal(got, c.want) {
			t.Errorf("[%g, %g] log=%v: labels %q, want %q", c.lo, c.hi, c.log, got, c.want)
		}
		if len(got) < 2 {
			t.Errorf("[%g, %g] log=%v: labels %q, want at least two", c.lo, c.hi, c.log, got)
		}
	}
	if sets := tickSets(1e-300, 1, true); len(labelled(sets[len(sets)-1])) > maxLogLabels {
		t.Errorf("[1e-300, 1]: sparsest set has %d labels", len(labelled(sets[len(sets)-1])))
	}
	for v, want := range map[float64]string{1e-5: "10^−5", 0.01: "0.01", 1e6: "10^6", 1e4: "10^4", 2e-7: "2×10^−7", 1000: "1000",
		1.0500000000000003: "1.05", 2.5e-12: "2.5×10^−12", 0: "0", -1e5: "-10^5", 0.30000000000000004: "0.3"} {
		if got := formatTick(v); got != want {
			t.Errorf("formatTick(%g) = %q, want %q", v, got, want)
		}
	}
}

// TestPowText: an exponent widens and heightens the label's box, and comes
// out as text of its own in the SVG.
func TestPowText(t *testing.T) {
	h := powText{text.Plain{Fonts: font.DefaultCache}}
	fnt := font.From(plot.DefaultFont, 10)
	w0, h0, _ := h.Plain.Box("10", fnt)
	w1, h1, _ := h.Box("10^−5", fnt)
	if !(w1 > w0 && h1 > h0) {
		t.Errorf("box of 10^−5: %v × %v, of 10: %v × %v", w1, h1, w0, h0)
	}
	x, y := line(1e-5, 1, 20, func(x float64) float64 { return x * x })
	path := filepath.Join(t.TempDir(), "pow")
	if err := (Figure{Title: "t", LogX: true, LogY: true, Series: []Series{{Name: "a", X: x, Y: y}}}).Save(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path + ".svg")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), ">−5<") || strings.Contains(string(raw), "^") {
		t.Error("SVG lacks the exponent −5 as text of its own, or shows a caret")
	}
}
