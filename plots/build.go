package plots

import (
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/recorder"
)

// lineWidth is the width of every series' line; two lines whose centres
// stay within coincideTol of each other look like one.
var (
	lineWidth   = vg.Points(1.5)
	coincideTol = vg.Points(1.5)
	// alternate is the dash pattern of a solid line drawn over another
	// line of another colour: the two colours alternate along it.
	alternate = []vg.Length{vg.Points(5), vg.Points(5)}
)

// panel is one laid-out figure: its plot, header and what a reader sees.
type panel struct {
	plot   *plot.Plot
	header header
	layout Layout
	ds     []*drawnSeries
}

// drawnSeries is a series with at least one drawable point, as drawn.
type drawnSeries struct {
	idx    int // index in Figure.Series
	runs   []plotter.XYs
	color  int            // palette index
	line   draw.LineStyle // as drawn
	thumb  draw.LineStyle // in the legend: the declared style
	glyph  draw.GlyphStyle
	points bool // a glyph at every point
	marks  bool // a glyph at a few points: its line lies on an earlier one of its colour
	notes  []string
}

// build validates f and lays it out as a panel width points wide.
func (f Figure) build(width vg.Length) (*panel, error) {
	if len(f.Series) == 0 {
		return nil, fmt.Errorf("plots: figure %q: Series is empty, want at least one series: %w", f.Title, ErrInvalid)
	}
	if err := checkLim("XLim", f.XLim, f.LogX); err != nil {
		return nil, fmt.Errorf("plots: figure %q: %w", f.Title, err)
	}
	if err := checkLim("YLim", f.YLim, f.LogY); err != nil {
		return nil, fmt.Errorf("plots: figure %q: %w", f.Title, err)
	}
	if f.Legend < LegendAuto || f.Legend > LegendBottomRight {
		return nil, fmt.Errorf("plots: figure %q: Legend = %d, want LegendAuto … LegendBottomRight: %w", f.Title, f.Legend, ErrInvalid)
	}
	for i, k := range f.Key {
		if k.Style < Solid || k.Style > Dotted {
			return nil, fmt.Errorf("plots: figure %q: Key[%d] %q: Style = %d, want Solid, Dashed or Dotted: %w", f.Title, i, k.Name, k.Style, ErrInvalid)
		}
	}
	p := plot.New()
	p.X.Label.Text = f.XLabel
	p.Y.Label.Text = f.YLabel
	p.Add(plotter.NewGrid())
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Tick.Label.Handler = powText{text.Plain{Fonts: font.DefaultCache}}
	}
	hd := newHeader(f.Title, f.Subtitle, width-vg.Points(12))

	explicit := false
	for _, s := range f.Series {
		explicit = explicit || s.Color != 0
	}
	var ds []*drawnSeries
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
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
		for _, r := range runs {
			for k, pt := range r {
				pt = plotter.XY{X: toAxis(pt.X, f.LogX), Y: toAxis(pt.Y, f.LogY)}
				r[k] = pt
				xmin, xmax = math.Min(xmin, pt.X), math.Max(xmax, pt.X)
				ymin, ymax = math.Min(ymin, pt.Y), math.Max(ymax, pt.Y)
			}
		}
		d := &drawnSeries{idx: i, runs: runs, color: colorIndex(explicit, i, s.Color), points: s.Points}
		d.line = draw.LineStyle{Color: palette[d.color], Width: lineWidth, Dashes: styleDashes[s.Style]}
		if !explicit && s.Style == Solid {
			d.line.Dashes = dashes[(i/len(palette))%len(dashes)]
		}
		d.thumb = d.line
		d.glyph = draw.GlyphStyle{Color: palette[d.color], Radius: vg.Points(2.5), Shape: glyphs[i%len(glyphs)]}
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		want := "finite"
		if f.LogX || f.LogY {
			want = "finite and positive on the log axes"
		}
		return nil, fmt.Errorf("plots: figure %q: none of its %d series has a drawable point, want at least one %s point: %w", f.Title, len(f.Series), want, ErrInvalid)
	}
	setRange(&p.X, xmin, xmax, f.XLim, f.LogX)
	setRange(&p.Y, ymin, ymax, f.YLim, f.LogY)

	body := draw.Canvas{Canvas: &recorder.Canvas{}, Rectangle: vg.Rectangle{Max: vg.Point{X: width, Y: PanelHeight - hd.height()}}}
	w, h := width-vg.Points(70), body.Max.Y-vg.Points(50) // a first guess of the data area
	remeasure := func() {
		chooseTicks(&p.X, w, true, f.LogX)
		chooseTicks(&p.Y, h, false, f.LogY)
		dc := p.DataCanvas(body)
		w, h = dc.Max.X-dc.Min.X, dc.Max.Y-dc.Min.Y
	}
	remeasure()
	remeasure()

	// The legend goes where it hides no data (making room if need be);
	// lines that lie on one another are then made both visible, and the
	// legend says so.
	// The legend may squeeze the data into minDataShare of the y axis, all
	// placements together, unless the caller fixed the range.
	span0 := p.Y.Max - p.Y.Min
	minShare := func() float64 {
		if f.YLim != [2]float64{} {
			return 2
		}
		return minDataShare * (p.Y.Max - p.Y.Min) / span0
	}
	names := legendNames(f, explicit)
	var coinc []Coincidence
	dealt := map[Coincidence]bool{}
	box, entries := f.legend(ds, false)
	for range 6 {
		if !box.empty() {
			// Notes inline or on rows of their own: whichever box hides
			// less, or needs less room.
			ss := samples(ds, p, w, h)
			pos, sh, hits := box.choose(f.Legend, ss, w, h, minShare())
			if alt, _ := f.legend(ds, true); alt.h != box.h {
				if ap, as, ah := alt.choose(f.Legend, ss, w, h, minShare()); as > sh || (as == sh && ah < hits) {
					box, pos, sh = alt, ap, as
				}
			}
			box.place(p, pos, sh)
			remeasure()
			remeasure()
		}
		found := false
		for _, c := range coincide(ds, p, w, h) {
			if !dealt[c] {
				dealt[c], found = true, true
				coinc = append(coinc, c)
				f.distinguish(ds, c, names)
			}
		}
		if found {
			box, entries = f.legend(ds, false) // with the notes: place it again
			continue
		}
		// Remeasuring can move the data a little under the legend: place
		// it again until it clears them.
		if box.empty() || box.hits(box.pos, samples(ds, p, w, h), w, h) == 0 {
			break
		}
	}

	for _, d := range ds {
		for k, r := range d.runs {
			if len(r) > 1 {
				l, err := plotter.NewLine(r)
				if err != nil {
					return nil, fmt.Errorf("plots: figure %q: series %q: %w", f.Title, f.Series[d.idx].Name, err)
				}
				l.LineStyle = d.line
				p.Add(l)
			}
			if d.points || len(r) == 1 || d.marks {
				pts := r
				if d.marks && !d.points && len(r) > 1 {
					pts = every(r, 12, k)
				}
				sc, err := plotter.NewScatter(pts)
				if err != nil {
					return nil, fmt.Errorf("plots: figure %q: series %q: %w", f.Title, f.Series[d.idx].Name, err)
				}
				sc.GlyphStyle = d.glyph
				p.Add(sc)
			}
		}
	}
	if !box.empty() {
		p.Add(box)
	}

	pn := &panel{plot: p, header: hd, ds: ds}
	pn.layout = f.report(p, box, ds, coinc, entries, hd, w, h)
	return pn, nil
}

// legend returns the legend box of the drawn series ds (the named ones,
// with their notes) and the key, and its entries. A note follows its name
// after a dash, or, with split, in parentheses on a row of its own (a
// narrower but taller box).
func (f Figure) legend(ds []*drawnSeries, split bool) (*legendBox, []string) {
	box := newLegendBox()
	var entries []string
	for _, d := range ds {
		s := f.Series[d.idx]
		if s.Name == "" {
			continue
		}
		name := s.Name
		if len(d.notes) > 0 {
			name += " — " + strings.Join(d.notes, "; ")
		}
		thumbs := []plot.Thumbnailer{lineThumb(d.thumb)}
		if d.points || d.marks {
			thumbs = append(thumbs, glyphThumb(d.glyph))
		}
		entries = append(entries, name)
		if !split || len(d.notes) == 0 {
			box.add(name, thumbs...)
			continue
		}
		box.add(s.Name, thumbs...)
		for _, n := range d.notes {
			box.add("(" + n + ")")
		}
	}
	for _, k := range f.Key {
		box.add(k.Name, lineThumb(draw.LineStyle{Color: keyColor, Width: lineWidth, Dashes: styleDashes[k.Style]}))
		entries = append(entries, k.Name)
	}
	return box, entries
}

// legendNames returns, for each series, the legend entry that stands for
// it: its own name, or (when colours are explicit) the name of the first
// named series of its colour; "" for none.
func legendNames(f Figure, explicit bool) []string {
	out := make([]string, len(f.Series))
	for i, s := range f.Series {
		out[i] = s.Name
		if s.Name != "" || !explicit {
			continue
		}
		ci := colorIndex(true, i, s.Color)
		for k, t := range f.Series {
			if t.Name != "" && colorIndex(true, k, t.Color) == ci {
				out[i] = t.Name
				break
			}
		}
	}
	return out
}

// every returns about n points of r spread evenly along it, shifted by
// phase so that the marks of several runs do not line up.
func every(r plotter.XYs, n, phase int) plotter.XYs {
	step := max(1, (len(r)+n-1)/n)
	var out plotter.XYs
	for i := (phase * step / 2) % step; i < len(r); i += step {
		out = append(out, r[i])
	}
	return out
}

// lineThumb is a legend thumbnail of a line style.
func lineThumb(ls draw.LineStyle) plot.Thumbnailer {
	l, _ := plotter.NewLine(plotter.XYs{{}})
	l.LineStyle = ls
	return l
}

// glyphThumb is a legend thumbnail of a glyph style.
func glyphThumb(gs draw.GlyphStyle) plot.Thumbnailer {
	s, _ := plotter.NewScatter(plotter.XYs{{}})
	s.GlyphStyle = gs
	return s
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

// colorIndex is the palette entry of series i (see Series.Color).
func colorIndex(explicit bool, i, color int) int {
	if explicit {
		i = color
	}
	return ((i % len(palette)) + len(palette)) % len(palette)
}

// toAxis maps a data value to axis coordinates: log10 on a log axis.
// Log axes are drawn as linear axes of log10 of the data (with ticks
// labelled in data values), which keeps gonum's layout linear: it centres
// its padding for an axis label on the arithmetic middle of the range.
func toAxis(v float64, log bool) float64 {
	if log {
		return math.Log10(v)
	}
	return v
}

// fromAxis is the inverse of toAxis.
func fromAxis(v float64, log bool) float64 {
	if log {
		return math.Pow(10, v)
	}
	return v
}

// setRange sets an axis' range in axis coordinates (see toAxis): the
// limits if given, else the data range lo … hi padded by 3% on each side,
// and widened when degenerate.
func setRange(ax *plot.Axis, lo, hi float64, lim [2]float64, log bool) {
	switch {
	case lim != [2]float64{}:
		lo, hi = toAxis(lim[0], log), toAxis(lim[1], log)
	case lo == hi && log:
		lo, hi = lo-math.Log10(2), hi+math.Log10(2)
	case lo == hi:
		d := math.Max(math.Abs(lo)/2, 0.5)
		lo, hi = lo-d, hi+d
	default:
		d := 0.03 * (hi - lo)
		lo, hi = lo-d, hi+d
	}
	ax.Min, ax.Max = lo, hi
}
