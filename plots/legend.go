package plots

import (
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Legend box geometry: the box sits legendInset inside a corner of the
// data area, its entries legendPad inside the box, and it must keep
// legendClear away from every drawn line.
var (
	legendInset = vg.Points(5)
	legendPad   = vg.Points(4)
	legendClear = vg.Points(3)
	legendSize  = vg.Points(10) // font size of the entries
)

// minDataShare is the least share of an axis the data may be squeezed into
// to make room for the legend.
const minDataShare = 0.55

// legendBox is the legend drawn as the last plotter, so that it lies inside
// the data area (never over the title or the axes) and above the lines, on
// a white ground.
type legendBox struct {
	leg  plot.Legend
	pos  LegendPos
	w, h vg.Length // size of the box
}

// newLegendBox returns an empty legend box.
func newLegendBox() *legendBox {
	l := plot.NewLegend()
	l.TextStyle.Font = font.From(plot.DefaultFont, legendSize)
	l.ThumbnailWidth = vg.Points(28)
	l.Padding = vg.Points(1.5)
	l.Top, l.Left = true, true
	return &legendBox{leg: l}
}

// add appends an entry and updates the box size.
func (b *legendBox) add(name string, thumbs ...plot.Thumbnailer) {
	b.leg.Add(name, thumbs...)
	r := b.leg.Rectangle(draw.Canvas{})
	b.w, b.h = r.Size().X+2*legendPad, r.Size().Y+2*legendPad
}

// empty reports whether the box has no entry.
func (b *legendBox) empty() bool { return b.w == 0 }

// rect is the box's rectangle in a data area of w × h points with its
// origin at (0, 0).
func (b *legendBox) rect(pos LegendPos, w, h vg.Length) vg.Rectangle {
	var r vg.Rectangle
	switch pos {
	case LegendTopLeft, LegendBottomLeft:
		r.Min.X = legendInset
	default:
		r.Min.X = w - legendInset - b.w
	}
	switch pos {
	case LegendBottomLeft, LegendBottomRight:
		r.Min.Y = legendInset
	default:
		r.Min.Y = h - legendInset - b.h
	}
	r.Max = vg.Point{X: r.Min.X + b.w, Y: r.Min.Y + b.h}
	return r
}

// Plot draws the box in its corner of the data area c.
func (b *legendBox) Plot(c draw.Canvas, _ *plot.Plot) {
	if b.empty() {
		return
	}
	r := b.rect(b.pos, c.Max.X-c.Min.X, c.Max.Y-c.Min.Y)
	r.Min, r.Max = r.Min.Add(c.Min), r.Max.Add(c.Min)
	pts := []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}, r.Min}
	c.FillPolygon(color.NRGBA{0xff, 0xff, 0xff, 0xe6}, pts)
	c.StrokeLines(draw.LineStyle{Color: color.RGBA{0xbb, 0xbb, 0xbb, 0xff}, Width: vg.Points(0.5)}, pts)
	in := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
		Min: vg.Point{X: r.Min.X + legendPad, Y: r.Min.Y + legendPad},
		Max: vg.Point{X: r.Max.X - legendPad, Y: r.Max.Y - legendPad},
	}}
	b.leg.Draw(in)
}

// corners are the legend corners in order of preference.
var corners = [...]LegendPos{LegendTopRight, LegendTopLeft, LegendBottomLeft, LegendBottomRight}

// hits counts the samples (data-area points, origin at the bottom left)
// within legendClear of the box in corner pos of a w × h data area, or
// between it and the edges of the corner.
func (b *legendBox) hits(pos LegendPos, samples []vg.Point, w, h vg.Length) int {
	r := b.rect(pos, w, h)
	// The box and the strip between it and the edges of its corner.
	if pos == LegendTopLeft || pos == LegendBottomLeft {
		r.Min.X = 0
	} else {
		r.Max.X = w
	}
	if pos == LegendTopLeft || pos == LegendTopRight {
		r.Max.Y = h
	} else {
		r.Min.Y = 0
	}
	n := 0
	for _, s := range samples {
		if s.X >= r.Min.X-legendClear && s.X <= r.Max.X+legendClear && s.Y >= r.Min.Y-legendClear && s.Y <= r.Max.Y+legendClear {
			n++
		}
	}
	return n
}

// squeeze returns the share s ≤ 1 of the y axis the data must be squeezed
// into (keeping the far end fixed) for the box in corner pos to clear every
// sample, 1 when it already does.
func (b *legendBox) squeeze(pos LegendPos, samples []vg.Point, w, h vg.Length) float64 {
	r := b.rect(pos, w, h)
	top := pos == LegendTopLeft || pos == LegendTopRight
	worst := 0.0 // the sample reaching furthest into the box's band, as a share of h from the far end
	for _, s := range samples {
		if s.X < r.Min.X-legendClear || s.X > r.Max.X+legendClear {
			continue
		}
		v := float64(s.Y / h)
		if !top {
			v = 1 - v
		}
		worst = math.Max(worst, v)
	}
	free := float64((h - legendInset - b.h - legendClear) / h) // share of h the data may take
	if worst <= free {
		return 1
	}
	return 0.995 * free / worst // a little slack against rounding
}

// choose picks the box's corner: want, unless the box cannot clear the
// samples there, or want is LegendAuto: then the corner needing the least
// room (ties in the order of corners). It returns the corner, the share s of
// the y axis the data must be squeezed into for the box to clear them there
// (1: none; 0: the share needed is below minShare, and hits samples stay
// hidden).
func (b *legendBox) choose(want LegendPos, samples []vg.Point, w, h vg.Length, minShare float64) (pos LegendPos, s float64, hits int) {
	room := func(c LegendPos) float64 {
		s := b.squeeze(c, samples, w, h)
		if s < 1 && s < minShare {
			return 0 // no room to be made
		}
		return s
	}
	if want != LegendAuto {
		if s := room(want); s > 0 {
			return want, s, 0
		}
	}
	pos, s, hits = corners[0], -1, math.MaxInt
	for _, c := range corners {
		cs, ch := room(c), b.hits(c, samples, w, h)
		if cs > s || (cs == s && cs == 0 && ch < hits) {
			pos, s, hits = c, cs, ch
		}
	}
	if s > 0 {
		hits = 0
	}
	return pos, s, hits
}

// place puts the box in corner pos and widens the y axis of p so that the
// data take the share s of it (0 < s < 1; otherwise it is left alone), the
// end away from the legend fixed.
func (b *legendBox) place(p *plot.Plot, pos LegendPos, s float64) {
	b.pos = pos
	if s <= 0 || s >= 1 {
		return
	}
	span := (p.Y.Max - p.Y.Min) / s // axis coordinates, see toAxis
	if pos == LegendTopLeft || pos == LegendTopRight {
		p.Y.Max = p.Y.Min + span
	} else {
		p.Y.Min = p.Y.Max - span
	}
}
