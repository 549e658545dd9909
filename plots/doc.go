// Package plots draws the line figures of `dpsgd plot` and `dpsgd bench`
// with gonum/plot, each written twice: a PNG (6 × 4 in per panel at 150 dpi,
// i.e. 900 × 600 pixels) and an SVG.
//
// A Figure is a title, axis labels, optional logarithmic axes and limits, and
// a list of Series (named x/y polylines, Solid, Dashed or Dotted, with
// optional point markers). Series get distinct colours from a ten-colour
// palette (in order, or by Series.Color so that related series share one)
// and appear in the legend under their names; the legend goes to the corner
// of the data area that hides the fewest data unless Figure.Legend says
// otherwise. Titles too wide for a panel are shrunk, then wrapped.
// Figure.Save writes one figure; SavePanels writes several side by side in
// one image (for example Figure 2 of van Dijk & Ertan's random-allocation paper:
// the μ coefficients and their ratio).
//
// Points that cannot be drawn, NaN or ±Inf, or values ≤ 0 on a logarithmic
// axis, are skipped and break the line there; a series left with no point
// at all is left out. A figure with nothing to draw, or a series whose X
// and Y lengths differ, is an error naming it. Logarithmic axes get a label
// at each power of ten (thinned out past ten decades) and at 2× and 5× when
// the range spans less than 1.5 decades. Every error wraps ErrInvalid and
// names the field and what it must be.
package plots
