package plots

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// build validates f and returns its plot.
func (f Figure) build() (*plot.Plot, error) {
	if len(f.Series) == 0 {
		return nil, fmt.Errorf("plots: figure %q: Series is empty, want at least one series: %w", f.Title, ErrInvalid)
	}
	if err := checkLim("XLim", f.XLim, f.LogX); err != nil {
		return nil, fmt.Errorf("plots: figure %q: %w", f.Title, err)
	}
	if err := checkLim("YLim", f.YLim, f.LogY); err != nil {
		return nil, fmt.Errorf("plots: figure %q: %w", f.Title, err)
	}
	p := plot.New()
	p.Title.Text = f.Title
	p.X.Label.Text = f.XLabel
	p.Y.Label.Text = f.YLabel
	if f.Legend < LegendAuto || f.Legend > LegendBottomRight {
		return nil, fmt.Errorf("plots: figure %q: Legend = %d, want LegendAuto … LegendBottomRight: %w", f.Title, f.Legend, ErrInvalid)
	}
	p.Legend.ThumbnailWidth = vg.Points(28)
	p.Add(plotter.NewGrid())

	var names []string    // legend entries
	var all []plotter.XYs // every drawn run, for legend placement
	explicit := false
	for _, s := range f.Series {
		explicit = explicit || s.Color != 0
	}
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	drawn := 0
	for i, s := range f.Series {
		if s.Style < Solid || s.Style > Dotted {
			return nil, fmt.Errorf("plots: figure %q: series %d %q: Style = %d, want Solid, Dashed or Dotted: %w", f.Title, i, s.Name, s.Style, ErrInvalid)
		}
		runs, err := s.runs(f.LogX, f.LogY)
		if err != nil {
			return nil, fmt.Errorf("plots: figure %q: series %d %q: %w", f.Title, i, s.Name, err)
		}
		if len(runs) == 0 {
			continue
		}
		drawn++
		ci := colorIndex(explicit, i, s.Color)
		ls := draw.LineStyle{Color: palette[ci], Width: vg.Points(1.5), Dashes: styleDashes[s.Style]}
		if !explicit && s.Style == Solid {
			ls.Dashes = dashes[(i/len(palette))%len(dashes)]
		}
		var thumbs []plot.Thumbnailer
		all = append(all, runs...)
		for k, r := range runs {
			for _, pt := range r {
				xmin, xmax = math.Min(xmin, pt.X), math.Max(xmax, pt.X)
				ymin, ymax = math.Min(ymin, pt.Y), math.Max(ymax, pt.Y)
			}
			if len(r) > 1 {
				l, err := plotter.NewLine(r)
				if err != nil {
					return nil, fmt.Errorf("plots: figure %q: series %q: %w", f.Title, s.Name, err)
				}
				l.LineStyle = ls
				p.Add(l)
				if len(thumbs) == 0 {
					thumbs = append(thumbs, l)
				}
			}
			if s.Points || len(r) == 1 {
				sc, err := plotter.NewScatter(r)
				if err != nil {
					return nil, fmt.Errorf("plots: figure %q: series %q: %w", f.Title, s.Name, err)
				}
				sc.GlyphStyle = draw.GlyphStyle{Color: ls.Color, Radius: vg.Points(2.5), Shape: glyphs[i%len(glyphs)]}
				p.Add(sc)
				if k == 0 {
					thumbs = append(thumbs, sc)
				}
			}
		}
		if s.Name != "" {
			p.Legend.Add(s.Name, thumbs...)
			names = append(names, s.Name)
		}
	}
	if drawn == 0 {
		want := "finite"
		if f.LogX || f.LogY {
			want = "finite and positive on the log axes"
		}
		return nil, fmt.Errorf("plots: figure %q: none of its %d series has a drawable point, want at least one %s point: %w", f.Title, len(f.Series), want, ErrInvalid)
	}
	fitTitle(p, PanelWidth-vg.Points(24))

	setRange(&p.X, xmin, xmax, f.XLim, f.LogX)
	setRange(&p.Y, ymin, ymax, f.YLim, f.LogY)
	pos := f.Legend
	if pos == LegendAuto {
		pos = bestCorner(p, names, all, f.LogX, f.LogY)
	}
	placeLegend(p, pos)
	return p, nil
}

// placeLegend puts the legend in corner pos, a little inside the data area.
func placeLegend(p *plot.Plot, pos LegendPos) {
	p.Legend.Top = pos == LegendTopRight || pos == LegendTopLeft
	p.Legend.Left = pos == LegendTopLeft || pos == LegendBottomLeft
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(6), -vg.Points(4)
	if p.Legend.Left {
		p.Legend.XOffs = vg.Points(6)
	}
	if !p.Legend.Top {
		p.Legend.YOffs = vg.Points(4)
	}
}

// bestCorner returns the corner whose legend box (estimated from the entry
// count and the widest name, against a 6 × 4 in panel's data area of about
// 370 × 230 pt) covers the fewest samples of the drawn lines (each segment
// sampled at 8 points, in axis coordinates). Ties go to top right, top left,
// bottom left, bottom right, in that order.
func bestCorner(p *plot.Plot, names []string, runs []plotter.XYs, logX, logY bool) LegendPos {
	if len(names) == 0 {
		return LegendTopRight
	}
	wMax := vg.Length(0)
	for _, n := range names {
		wMax = max(wMax, p.Legend.TextStyle.Width(n))
	}
	entryH := p.Legend.TextStyle.Height("Xg") + p.Legend.Padding
	bw := math.Min(0.95, float64(wMax+p.Legend.ThumbnailWidth+vg.Points(16))/370)
	bh := math.Min(0.95, float64(vg.Length(len(names))*entryH+vg.Points(8))/230)
	norm := func(v, lo, hi float64, log bool) float64 {
		if log {
			return math.Log(v/lo) / math.Log(hi/lo)
		}
		return (v - lo) / (hi - lo)
	}
	corners := [...]LegendPos{LegendTopRight, LegendTopLeft, LegendBottomLeft, LegendBottomRight}
	var count [4]int
	hit := func(u, v float64) {
		right, left := u >= 1-bw && u <= 1, u >= 0 && u <= bw
		top, bottom := v >= 1-bh && v <= 1, v >= 0 && v <= bh
		for k, c := range [4]bool{top && right, top && left, bottom && left, bottom && right} {
			if c {
				count[k]++
			}
		}
	}
	for _, r := range runs {
		for i, pt := range r {
			u, v := norm(pt.X, p.X.Min, p.X.Max, logX), norm(pt.Y, p.Y.Min, p.Y.Max, logY)
			hit(u, v)
			if i+1 < len(r) {
				u2, v2 := norm(r[i+1].X, p.X.Min, p.X.Max, logX), norm(r[i+1].Y, p.Y.Min, p.Y.Max, logY)
				for s := 1; s < 8; s++ {
					t := float64(s) / 8
					hit(u+t*(u2-u), v+t*(v2-v))
				}
			}
		}
	}
	best := 0
	for k := range count {
		if count[k] < count[best] {
			best = k
		}
	}
	return corners[best]
}

// checkLim validates an axis limit pair: zero (auto) or lo < hi, finite,
// and positive on a log axis.
func checkLim(field string, lim [2]float64, log bool) error {
	if lim == [2]float64{} {
		return nil
	}
	lo, hi := lim[0], lim[1]
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || !(lo < hi) {
		return fmt.Errorf("%s = [%g, %g], want finite lo < hi (or both 0 for automatic): %w", field, lo, hi, ErrInvalid)
	}
	if log && !(lo > 0) {
		return fmt.Errorf("%s = [%g, %g] on a log axis, want 0 < lo < hi: %w", field, lo, hi, ErrInvalid)
	}
	return nil
}

// runs splits s into maximal runs of drawable points: finite, and positive
// on a log axis. A series without any gives no runs.
func (s Series) runs(logX, logY bool) ([]plotter.XYs, error) {
	if len(s.X) != len(s.Y) {
		return nil, fmt.Errorf("len(X) = %d and len(Y) = %d, want equal lengths: %w", len(s.X), len(s.Y), ErrInvalid)
	}
	ok := func(v float64, log bool) bool {
		return !math.IsNaN(v) && !math.IsInf(v, 0) && (!log || v > 0)
	}
	var runs []plotter.XYs
	var cur plotter.XYs
	for i := range s.X {
		if ok(s.X[i], logX) && ok(s.Y[i], logY) {
			cur = append(cur, plotter.XY{X: s.X[i], Y: s.Y[i]})
			continue
		}
		if len(cur) > 0 {
			runs = append(runs, cur)
			cur = nil
		}
	}
	if len(cur) > 0 {
		runs = append(runs, cur)
	}
	return runs, nil
}

// fitTitle shrinks the title font (down to 8 pt) and, if that is not
// enough, breaks the title into two lines at the space nearest its middle,
// so that it fits in width.
func fitTitle(p *plot.Plot, width vg.Length) {
	if p.Title.Text == "" {
		return
	}
	orig := p.Title.TextStyle.Font.Size
	try := func(txt string, minSize vg.Length) bool {
		st := p.Title.TextStyle
		for size := orig; size >= minSize; size -= vg.Points(0.5) {
			st.Font.Size = size
			if st.Width(txt) <= width {
				p.Title.Text, p.Title.TextStyle = txt, st
				return true
			}
		}
		return false
	}
	if try(p.Title.Text, vg.Points(10)) {
		return
	}
	txt, mid, cut := p.Title.Text, len(p.Title.Text)/2, -1
	for i := range txt {
		if txt[i] == ' ' && (cut < 0 || abs(i-mid) < abs(cut-mid)) {
			cut = i
		}
	}
	if cut > 0 {
		txt = txt[:cut] + "\n" + txt[cut+1:]
	}
	if !try(txt, vg.Points(8)) {
		p.Title.Text = txt
		p.Title.TextStyle.Font.Size = vg.Points(8)
	}
}

// colorIndex is the palette entry of series i (see Series.Color).
func colorIndex(explicit bool, i, color int) int {
	if explicit {
		i = color
	}
	return ((i % len(palette)) + len(palette)) % len(palette)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// setRange sets an axis' range (the limits if given, else the data range
// padded by 3% on each side, and widened when degenerate), scale and ticks.
func setRange(ax *plot.Axis, lo, hi float64, lim [2]float64, log bool) {
	switch {
	case lim != [2]float64{}:
		lo, hi = lim[0], lim[1]
	case lo == hi && log:
		lo, hi = lo/2, hi*2
	case lo == hi:
		d := math.Max(math.Abs(lo)/2, 0.5)
		lo, hi = lo-d, hi+d
	case log:
		r := math.Pow(hi/lo, 0.03)
		lo, hi = lo/r, hi*r
	default:
		d := 0.03 * (hi - lo)
		lo, hi = lo-d, hi+d
	}
	ax.Min, ax.Max = lo, hi
	if log {
		ax.Scale = plot.LogScale{}
		ax.Tick.Marker = logTicks{}
	} else {
		ax.Tick.Marker = linTicks{}
	}
}

// linTicks is gonum's default linear ticker with labels printed to enough
// digits to tell neighbours apart (the default can print 1.05 as "1.1").
type linTicks struct{}

func (linTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i, t := range ticks {
		if t.Label == "" {
			continue
		}
		v := t.Value
		if math.Abs(v) < 1e-9*(hi-lo) {
			v = 0
		}
		ticks[i].Label = formatTick(v)
	}
	return ticks
}

// logTicks marks a log axis: a labelled tick at each power of ten (every
// k-th one over more than 10 decades), minor ticks at 2…9 × 10ᵏ when there
// are at most 10 decades, and labels at 2× and 5× as well when the range spans less
// than 1.5 decades. A range too narrow for two labels gets gonum's default
// (linear) ticks.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi >= lo) || math.IsInf(hi, 0) {
		return nil
	}
	kLo := int(math.Floor(math.Log10(lo)))
	kHi := int(math.Ceil(math.Log10(hi)))
	decades := kHi - kLo
	narrow := math.Log10(hi/lo) < 1.5
	step := 1
	if decades > 10 {
		step = (decades + 9) / 10
	}
	var ticks []plot.Tick
	labels := 0
	add := func(v float64, label bool) {
		if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
			return
		}
		t := plot.Tick{Value: v}
		if label {
			t.Label = formatTick(v)
			labels++
		}
		ticks = append(ticks, t)
	}
	for k := kLo; k <= kHi; k++ {
		base := math.Pow(10, float64(k))
		add(base, (k-kLo)%step == 0)
		if decades <= 10 {
			for m := 2; m <= 9; m++ {
				add(float64(m)*base, narrow && (m == 2 || m == 5))
			}
		}
	}
	if labels < 2 {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	return ticks
}

// formatTick prints v to 10 significant digits, trailing zeros dropped,
// as "1e-5" outside [10⁻³, 10⁴).
func formatTick(v float64) string {
	v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 10, 64), 64) // round to 10 digits
	if v != 0 && (math.Abs(v) < 1e-3 || math.Abs(v) >= 1e4) {
		m := strconv.FormatFloat(v, 'e', -1, 64)
		i := strings.IndexByte(m, 'e')
		e, _ := strconv.Atoi(m[i+1:])
		return m[:i] + "e" + strconv.Itoa(e)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
