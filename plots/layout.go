package plots

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// Layout is a figure as a reader will see it, for checks of its
// readability (see Layouts).
type Layout struct {
	Title, Subtitle []string // lines, as wrapped
	// Legend holds the entries: the named series, with a note after " — "
	// where a line lies on another (drawn after the name, or in parentheses
	// on a row of its own when that needs less room), then the Key.
	Legend    []string
	LegendPos LegendPos // the corner the legend went to
	// XTicks and YTicks are the tick labels, in axis order.
	XTicks, YTicks []string
	// Coincide lists the lines that lie on one another; each such pair is
	// drawn so that both show, and the legend says so.
	Coincide []Coincidence
	// Problems says what a reader would trip on, one sentence each: a legend
	// entry twice, a legend over data, tick labels that overlap, an axis
	// with fewer than two tick labels, a hidden line. Empty when none.
	Problems []string
}

// report fills the Layout of a built panel: p with legend box (drawn
// series ds, the coincidences found and dealt with, the legend entries) in
// a data area of w × h points under header hd.
func (f Figure) report(p *plot.Plot, box *legendBox, ds []*drawnSeries, coinc []Coincidence, entries []string, hd header, w, h vg.Length) Layout {
	l := Layout{Title: hd.title, Subtitle: hd.subtitle, Legend: entries, Coincide: coinc}
	if !box.empty() {
		l.LegendPos = box.pos
	}
	var probs []string
	seen := map[string]bool{}
	for _, e := range entries {
		if seen[e] {
			probs = append(probs, fmt.Sprintf("legend entry %q appears twice", e))
		}
		seen[e] = true
	}
	if !box.empty() {
		if n := box.hits(box.pos, samples(ds, p, w, h), w, h); n > 0 {
			probs = append(probs, fmt.Sprintf("the legend (%s) covers %d samples of the data lines", box.pos, n))
		}
	}
	for _, ax := range []struct {
		name       string
		a          *plot.Axis
		length     vg.Length
		horizontal bool
		out        *[]string
	}{{"x", &p.X, w, true, &l.XTicks}, {"y", &p.Y, h, false, &l.YTicks}} {
		ls := labelled(ax.a.Tick.Marker.Ticks(ax.a.Min, ax.a.Max))
		for _, t := range ls {
			*ax.out = append(*ax.out, t.Label)
		}
		if len(ls) < 2 {
			probs = append(probs, fmt.Sprintf("the %s axis has %d tick labels, want at least 2", ax.name, len(ls)))
		}
		for _, c := range crowded(ax.a, ls, ax.length, ax.horizontal) {
			probs = append(probs, fmt.Sprintf("%s tick labels %q and %q crowd each other", ax.name, c[0], c[1]))
		}
	}
	// Lines hidden under others after the legend made room: the pairs found
	// then were dealt with; any new one is a problem.
	dealt := map[Coincidence]bool{}
	for _, c := range coinc {
		dealt[c] = true
	}
	for _, c := range coincide(ds, p, w, h) {
		if !dealt[c] {
			probs = append(probs, fmt.Sprintf("series %d %q lies under series %d %q", c.Under, f.Series[c.Under].Name, c.Over, f.Series[c.Over].Name))
		}
	}
	l.Problems = probs
	return l
}
