package main

import (
	"fmt"

	"github.com/dpsgd/dpsgd/plots"
	"github.com/dpsgd/dpsgd/privacy/ball"
)

// ballPlotDims are the dimensions of the ball figure. Tholeti's text does not
// list the d of its Fig. 2; its analysis walks through d = 1, 3, 5, … (Eq. 9),
// and these span one dimension to a small model.
var ballPlotDims = []int{1, 2, 3, 5, 10, 100, 1000}

// ball is Tholeti's Fig. 2: the δ of one step of ball noise against the
// distance Δ ∈ [0, 2] between neighbouring gradients, at r = 1, for several
// d (δ grows with d and Δ; d = 1 is the line Δ/2). A second panel shows the
// small-Δ end on log axes, where δ ∝ Δ/r with a slope that grows like √d.
func (f *plotFlags) ball() ([]plots.Figure, error) {
	return ballFigures(f.quick)
}

// ballFigures computes the two panels of the ball figure; quick uses fewer
// points.
func ballFigures(quick bool) ([]plots.Figure, error) {
	n := 201
	if quick {
		n = 21
	}
	lin := plots.Figure{
		Title:    "δ of one step of noise drawn uniformly from a ball, against the distance Δ between neighbouring gradients",
		Subtitle: "Ball radius r = 1; d: dimension of the gradient; δ = I(Δ²/4; 1/2, (d+1)/2), the regularized incomplete beta function. After Figure 2 of Tholeti & Kalyani.",
		XLabel:   "distance Δ between neighbouring gradients", YLabel: "δ of one step",
		YLim: [2]float64{0, 1.02}, Legend: plots.LegendBottomRight,
	}
	logp := plots.Figure{
		Title:    "The same on log axes: for small Δ/r, δ grows in proportion to Δ/r",
		Subtitle: "The slope grows with the dimension d, like √d.",
		XLabel:   "Δ / r (distance over ball radius)", YLabel: "δ of one step", LogX: true, LogY: true, Legend: plots.LegendBottomRight,
	}
	for i, d := range ballPlotDims {
		s := plots.Series{Name: fmt.Sprintf("d = %d", d), Color: i}
		for _, dist := range linGrid(0, 2, n) {
			v, err := ball.StepDelta(d, dist, 1)
			if err != nil {
				return nil, err
			}
			s.X, s.Y = append(s.X, dist), append(s.Y, v)
		}
		lin.Series = append(lin.Series, s)
		l := plots.Series{Name: s.Name, Color: i}
		for _, dist := range logGrid(1e-4, 2, n) {
			v, err := ball.StepDelta(d, dist, 1)
			if err != nil {
				return nil, err
			}
			l.X, l.Y = append(l.X, dist), append(l.Y, v)
		}
		logp.Series = append(logp.Series, l)
	}
	return []plots.Figure{lin, logp}, nil
}
