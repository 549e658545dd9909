package bench

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/plots"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
)

// samplerColor is the palette entry of a sampler, the same in every figure.
func samplerColor(name string) int {
	switch name {
	case privacy.SamplerShuffle:
		return 0
	case privacy.SamplerPoisson:
		return 1
	case privacy.SamplerPoissonTruncated:
		return 2
	case privacy.SamplerAllocation:
		return 3
	}
	return 4
}

// colorGrey is the palette entry of Poisson accounting applied to shuffling.
const colorGrey = 7

// errorBarFigure draws, per sampler, mean(target ε) as a line with points and a vertical bar
// of ± sd at each point, offset sideways by a few percent per sampler (log x axis).
func errorBarFigure(r *SamplersResult, title, ylabel string, val func(Cell) (mean, sd float64)) plots.Figure {
	fig := plots.Figure{Title: title, XLabel: fmt.Sprintf("target ε (δ = %s)", Num(r.Delta)), YLabel: ylabel, LogX: true}
	var bars []plots.Series // after the lines, so that each sampler gets its own glyph
	for k, name := range r.Samplers {
		off := math.Pow(1.04, float64(k)-float64(len(r.Samplers)-1)/2)
		col := samplerColor(name)
		s := plots.Series{Name: name, Color: col, Points: true}
		for _, c := range r.Cells {
			if c.Sampler != name {
				continue
			}
			m, sd := val(c)
			x := c.TargetEpsilon * off
			s.X, s.Y = append(s.X, x), append(s.Y, m)
			if sd > 0 {
				bars = append(bars, plots.Series{X: []float64{x, x}, Y: []float64{m - sd, m + sd}, Color: col})
			}
		}
		fig.Series = append(fig.Series, s)
	}
	fig.Series = append(fig.Series, bars...)
	if len(r.Targets) > 0 {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, t := range r.Targets {
			lo, hi = math.Min(lo, t), math.Max(hi, t)
		}
		fig.XLim = [2]float64{lo / 1.3, hi * 1.3}
	}
	return fig
}

// accuracyFigure is test accuracy against the target ε, per sampler, ± sd.
func accuracyFigure(r *SamplersResult) plots.Figure {
	return errorBarFigure(r, fmt.Sprintf("Test accuracy at a target ε: %s %s, %d epochs", r.Dataset, r.Arch, r.Epochs),
		"test accuracy (mean ± sd over seeds)", func(c Cell) (float64, float64) { return c.AccuracyMean, c.AccuracySD })
}

// speedFigure is training throughput against the target ε, per sampler, ± sd.
func speedFigure(r *SamplersResult) plots.Figure {
	return errorBarFigure(r, fmt.Sprintf("Training throughput: %s %s, batch %d", r.Dataset, r.Arch, r.BatchSize),
		"examples/s (mean ± sd over seeds)", func(c Cell) (float64, float64) { return c.ExamplesPerSecond, c.ExamplesPerSecSD })
}

// privacyFigure is ε over epochs at the privacy comparison's σ: guarantees solid, the shuffle
// lower bound dotted, Poisson accounting applied to shuffling dashed grey.
func privacyFigure(r *SamplersResult) plots.Figure {
	pc := r.Privacy
	fig := plots.Figure{Title: fmt.Sprintf("ε at δ = %s over epochs, σ = %s, N = %d, batch %d", Num(pc.Delta), Num(pc.Sigma), pc.DatasetSize, pc.BatchSize),
		XLabel: "epochs", YLabel: "ε", LogY: true}
	lo, hi := math.Inf(1), 0.0
	for _, c := range pc.Curves {
		s := plots.Series{Name: fmt.Sprintf("%s (%s)", c.Sampler, c.Accountant), Color: samplerColor(c.Sampler)}
		switch accounting.Kind(c.Kind) {
		case accounting.KindLowerBound:
			s.Name, s.Style = "shuffle lower bound: true ε ≥ this", plots.Dotted
		case accounting.KindAssumesPoisson:
			s.Name, s.Style, s.Color = "shuffle as if Poisson: NOT valid", plots.Dashed, colorGrey
		}
		for i, e := range c.Epochs {
			if c.Epsilon[i] != nil && *c.Epsilon[i] > 0 {
				y := *c.Epsilon[i]
				s.X, s.Y = append(s.X, float64(e)), append(s.Y, y)
				lo, hi = math.Min(lo, y), math.Max(hi, y)
			}
		}
		if len(c.Epochs) == 1 {
			s.Points = true
		}
		fig.Series = append(fig.Series, s)
	}
	if hi > lo {
		fig.YLim = [2]float64{lo / 1.5, hi * 12} // head room for the legend
		fig.Legend = plots.LegendTopLeft
	}
	return fig
}
