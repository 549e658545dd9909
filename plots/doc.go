// Package plots draws the line figures of `dpsgd plot`, `dpsgd bench` and
// `dpsgd ageaware` with gonum/plot, each written twice: a PNG (6 × 4 in per
// panel at 150 dpi, i.e. 900 × 600 pixels) and an SVG.
//
// A Figure is a title (what the figure shows, in words), an optional
// subtitle (a smaller italic caption: the setting, the paper it follows),
// axis labels, optional logarithmic axes and limits, a list of Series
// (named x/y polylines, Solid, Dashed or Dotted, with optional point
// markers) and an optional Key that explains line styles shared by several
// series. Series get distinct colours from a ten-colour palette (in order,
// or by Series.Color so that related series share one) and appear in the
// legend under their names. Title and subtitle are shrunk, then wrapped
// into even lines, to fit the panel. Figure.Save writes one figure;
// SavePanels writes several side by side in one image, their data areas
// aligned under a common header band.
//
// The package lays a figure out so that a reader does not trip:
//   - the legend lies inside the data area on a white ground, never over
//     the title or the axes, in the corner that needs the least room; the
//     y axis is widened (unless YLim fixes it) until the legend hides no
//     line, as long as the data keep at least 55% of the axis;
//   - a line that lies within a line width of a later one over all its
//     length (it would be hidden) is told apart: the later line alternates
//     with it in dashes (another colour) or carries marks (same colour),
//     and the legend says "coincides with …";
//   - tick labels are the densest "nice" set (1, 2, 2.5, 5 × 10ᵏ steps;
//     on log axes 1, 2, 5 × 10ᵏ, then powers of ten, then every k-th)
//     whose labels do not crowd on the panel; log axes read 10ᵏ with a
//     raised exponent outside [0.001, 10⁴).
//
// Layouts reports, without drawing, what a reader will see of each panel
// (title lines, legend entries, tick labels, lines on one another) and any
// problem left (a legend over data, crowded ticks, a legend entry twice),
// for tests and for commands that warn.
//
// Log axes are drawn as linear axes of log10 of the data, ticks labelled in
// data values. Points that cannot be drawn, NaN or ±Inf, or values ≤ 0 on a
// logarithmic axis, are skipped and break the line there; a series left
// with no point at all is left out. A figure with nothing to draw, or a
// series whose X and Y lengths differ, is an error naming it. Every error
// wraps ErrInvalid and names the field and what it must be.
package plots
