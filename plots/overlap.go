package plots

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// sampleStep is the spacing of the samples taken along a line.
var sampleStep = vg.Points(2)

// toData maps a data point to the data area of p, w × h points with the
// origin at its bottom left.
func toData(p *plot.Plot, w, h vg.Length, x, y float64) vg.Point {
	return vg.Point{X: vg.Length(p.X.Norm(x)) * w, Y: vg.Length(p.Y.Norm(y)) * h}
}

// polylines returns the runs of d in data-area points.
func (d *drawnSeries) polylines(p *plot.Plot, w, h vg.Length) [][]vg.Point {
	out := make([][]vg.Point, len(d.runs))
	for k, r := range d.runs {
		out[k] = make([]vg.Point, len(r))
		for i, pt := range r {
			out[k][i] = toData(p, w, h, pt.X, pt.Y)
		}
	}
	return out
}

// lineSamples returns points at most sampleStep apart along the lines
// (every vertex among them) that fall inside the w × h data area.
func lineSamples(lines [][]vg.Point, w, h vg.Length) []vg.Point {
	var out []vg.Point
	in := func(q vg.Point) bool {
		const eps = 1e-6
		return q.X >= -eps && q.X <= w+eps && q.Y >= -eps && q.Y <= h+eps
	}
	add := func(q vg.Point) {
		if in(q) {
			out = append(out, q)
		}
	}
	for _, l := range lines {
		for i, a := range l {
			add(a)
			if i+1 == len(l) {
				break
			}
			b := l[i+1]
			// Clip the segment to the data area (with a margin) before
			// sampling, so that a segment running far outside costs little.
			if (a.X < 0 && b.X < 0) || (a.X > w && b.X > w) || (a.Y < 0 && b.Y < 0) || (a.Y > h && b.Y > h) {
				continue
			}
			n := int(math.Ceil(float64(dist(a, b) / sampleStep)))
			if n > 4096 {
				n = 4096
			}
			for s := 1; s < n; s++ {
				t := vg.Length(float64(s) / float64(n))
				add(vg.Point{X: a.X + t*(b.X-a.X), Y: a.Y + t*(b.Y-a.Y)})
			}
		}
	}
	return out
}

// samples returns the samples of every drawn series, for legend placement.
func samples(ds []*drawnSeries, p *plot.Plot, w, h vg.Length) []vg.Point {
	var out []vg.Point
	for _, d := range ds {
		out = append(out, lineSamples(d.polylines(p, w, h), w, h)...)
	}
	return out
}

func dist(a, b vg.Point) vg.Length {
	return vg.Length(math.Hypot(float64(a.X-b.X), float64(a.Y-b.Y)))
}

// segDist is the distance from q to the segment ab.
func segDist(q, a, b vg.Point) vg.Length {
	dx, dy := b.X-a.X, b.Y-a.Y
	l2 := dx*dx + dy*dy
	if l2 == 0 {
		return dist(q, a)
	}
	t := ((q.X-a.X)*dx + (q.Y-a.Y)*dy) / l2
	t = max(0, min(1, t))
	return dist(q, vg.Point{X: a.X + t*dx, Y: a.Y + t*dy})
}

// near reports whether q lies within tol of one of the lines (a run of one
// point counts as that point).
func near(q vg.Point, lines [][]vg.Point, tol vg.Length) bool {
	for _, l := range lines {
		if len(l) == 1 && dist(q, l[0]) <= tol {
			return true
		}
		for i := 1; i < len(l); i++ {
			if segDist(q, l[i-1], l[i]) <= tol {
				return true
			}
		}
	}
	return false
}

// Coincidence is a pair of series whose lines lie on one another: every
// visible part of series Under (an index in Figure.Series) lies within a
// line width of series Over, drawn after it, so that drawn alike Under
// would be hidden.
type Coincidence struct{ Under, Over int }

// coincide finds, for each drawn series with a visible line, the first
// later series whose line hides it.
func coincide(ds []*drawnSeries, p *plot.Plot, w, h vg.Length) []Coincidence {
	lines := make([][][]vg.Point, len(ds))
	for i, d := range ds {
		lines[i] = d.polylines(p, w, h)
	}
	var out []Coincidence
	for i, d := range ds {
		ss := lineSamples(lines[i], w, h)
		if len(ss) < 2 {
			continue
		}
		for j := i + 1; j < len(ds); j++ {
			hidden := true
			for _, q := range ss {
				if !near(q, lines[j], coincideTol) {
					hidden = false
					break
				}
			}
			if hidden {
				out = append(out, Coincidence{Under: d.idx, Over: ds[j].idx})
				break
			}
		}
	}
	return out
}

// find returns the drawn series of Figure.Series index idx.
func find(ds []*drawnSeries, idx int) *drawnSeries {
	for _, d := range ds {
		if d.idx == idx {
			return d
		}
	}
	return nil
}

// distinguish draws the upper series of c so that the lower one shows
// (colours alternating along a solid line, or marks on a line of the same
// colour) and notes in the legend that the lines coincide.
func (f Figure) distinguish(ds []*drawnSeries, c Coincidence, names []string) {
	under, over := find(ds, c.Under), find(ds, c.Over)
	switch {
	case under.color != over.color && (len(over.line.Dashes) == 0 || slices.Equal(over.line.Dashes, under.line.Dashes)):
		over.line.Dashes = alternate
	case under.color == over.color:
		over.marks = true
		if under.points || under.marks {
			for k := 1; over.glyph.Shape == under.glyph.Shape; k++ {
				over.glyph.Shape = glyphs[(c.Over+k)%len(glyphs)]
			}
		}
	}
	// The note goes to the legend entry of the lower series, else of the
	// upper one.
	nu, no := names[c.Under], names[c.Over]
	styleOf := func(i int) string {
		if len(f.Key) == 0 {
			return ""
		}
		return f.Series[i].Style.String() + " "
	}
	var owner, note string
	switch {
	case nu != "" && nu == no && len(f.Key) > 0:
		owner, note = nu, fmt.Sprintf("%sand %slines coincide", styleOf(c.Under), styleOf(c.Over))
	case nu != "" && nu == no:
		owner, note = nu, "two of its lines coincide"
	case nu != "" && no != "" && len(f.Key) > 0 && f.Series[c.Under].Style == f.Series[c.Over].Style:
		owner, note = nu, fmt.Sprintf("%sline coincides with %s's", styleOf(c.Under), no)
	case nu != "" && no != "" && len(f.Key) > 0:
		owner, note = nu, fmt.Sprintf("%sline coincides with %s's %sline", styleOf(c.Under), no, styleOf(c.Over))
	case nu != "" && no != "":
		owner, note = nu, "coincides with "+no
	case nu != "":
		owner, note = nu, styleOf(c.Under)+"line lies under another"
	case no != "":
		owner, note = no, styleOf(c.Over)+"line lies on another"
	default:
		return
	}
	for _, d := range ds {
		if f.Series[d.idx].Name == owner {
			d.notes = append(d.notes, note)
			return
		}
	}
}
