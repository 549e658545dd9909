package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/dpsgd/dpsgd/bench"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/plots"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"github.com/dpsgd/dpsgd/privacy/allocation"
	"github.com/dpsgd/dpsgd/privacy/fdp"
)

// figureNames are the figures dpsgd plot draws, in the order of --figure all.
var figureNames = []string{"fig1", "fig2", "fig3", "tradeoff", "samplers", "ball"}

type plotFlags struct {
	figure, out, sampler string
	sigma, delta         float64
	datasetSize, batch   int
	epochs               int
	quick                bool
}

func parsePlotFlags(args []string, stdout io.Writer) (*plotFlags, error) {
	f := &plotFlags{}
	fs := newFlagSet("dpsgd plot")
	fs.StringVar(&f.figure, "figure", "all", "fig1 (van Dijk & Ertan's Figure 1: δ vs M), fig2 (μ coefficients and ratio), fig3 (required M vs σ), tradeoff (trade-off curves of a run), samplers (ε over epochs: shuffle, Poisson, allocation), or all")
	fs.StringVar(&f.out, "out", "figures", "output directory (each figure as NAME.png and NAME.svg)")
	fs.StringVar(&f.sampler, "sampler", "allocation", "tradeoff: the sampler of the run")
	fs.Var(realFlag{&f.sigma}, "sigma", "tradeoff, samplers: noise multiplier (default 1)")
	fs.Var(realFlag{&f.delta}, "delta", "samplers: δ of the reported ε (default 1e-5)")
	fs.Var(countFlag{&f.datasetSize, 1}, "dataset-size", "tradeoff, samplers: N (default 60000)")
	fs.Var(countFlag{&f.batch, 1}, "batch-size", "tradeoff, samplers: expected batch size (default 600)")
	fs.Var(countFlag{&f.epochs, 1}, "epochs", "tradeoff: epochs of the run (default 5); samplers: the last epoch (default 30)")
	fs.BoolVar(&f.quick, "quick", false, "fewer points (for tests)")
	set, err := parseFlags(fs, args, stdout, "Usage: dpsgd plot [flags]\n\nDraws figures of the accountants as PNG and SVG.")
	if err != nil {
		return nil, err
	}
	if !set["sigma"] {
		f.sigma = 1
	} else if !(f.sigma > 0) {
		return nil, usagef("--sigma %v: out of range (0, +Inf)", f.sigma)
	}
	if !set["delta"] {
		f.delta = 1e-5
	} else if !(f.delta > 0 && f.delta < 1) {
		return nil, usagef("--delta %v: out of range (0, 1)", f.delta)
	}
	if !set["dataset-size"] {
		f.datasetSize = 60000
	}
	if !set["batch-size"] {
		f.batch = 600
	}
	if f.batch > f.datasetSize {
		return nil, usagef("--batch-size %d: out of range [1, --dataset-size = %d]", f.batch, f.datasetSize)
	}
	if !set["epochs"] {
		f.epochs = 0
	}
	valid := append([]string{"all"}, figureNames...)
	ok := false
	for _, n := range valid {
		ok = ok || n == f.figure
	}
	if !ok {
		return nil, usagef("--figure %q: want one of %s", f.figure, strings.Join(valid, ", "))
	}
	if accounting.Methods(f.sampler) == nil {
		return nil, usagef("--sampler %q: want shuffle, poisson, poisson-truncated or allocation", f.sampler)
	}
	return f, nil
}

func cmdPlot(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parsePlotFlags(args, stdout)
	if err != nil {
		return err // pflag.ErrHelp after --help: report exits 0
	}
	names := figureNames
	if f.figure != "all" {
		names = []string{f.figure}
	}
	drawn, err := f.draw(ctx, names, stdout)
	if err != nil {
		return err
	}
	for _, d := range drawn {
		for i, l := range d.layouts {
			for _, p := range l.Problems {
				fmt.Fprintf(stderr, "dpsgd plot: warning: figure %s, panel %d: %s\n", d.name, i+1, p)
			}
		}
	}
	return nil
}

// drawnFigure is a figure written by dpsgd plot: its name, panels and
// what a reader sees of each panel.
type drawnFigure struct {
	name    string
	figs    []plots.Figure
	layouts []plots.Layout
}

// draw computes the named figures and writes each to --out as NAME.png and
// NAME.svg, saying so on stdout.
func (f *plotFlags) draw(ctx context.Context, names []string, stdout io.Writer) ([]drawnFigure, error) {
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return nil, fmt.Errorf("--out %s: %w", f.out, err)
	}
	var out []drawnFigure
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		figs, err := f.build(name)
		if err != nil {
			return nil, fmt.Errorf("figure %s: %w", name, err)
		}
		layouts, err := plots.Layouts(figs...)
		if err != nil {
			return nil, fmt.Errorf("figure %s: %w", name, err)
		}
		path := filepath.Join(f.out, name)
		if err := plots.SavePanels(path, figs...); err != nil {
			return nil, fmt.Errorf("figure %s: %w", name, err)
		}
		fmt.Fprintf(stdout, "wrote %s.png and %s.svg\n", path, path)
		out = append(out, drawnFigure{name: name, figs: figs, layouts: layouts})
	}
	return out, nil
}

// build computes the figure named name: one or more panels of one image.
func (f *plotFlags) build(name string) ([]plots.Figure, error) {
	switch name {
	case "fig1":
		return f.fig1()
	case "fig2":
		return f.fig2()
	case "fig3":
		return f.fig3()
	case "tradeoff":
		return f.tradeoff()
	case "ball":
		return f.ball()
	case "samplers":
		return f.samplers()
	}
	return nil, fmt.Errorf("unknown figure %q", name)
}

// logGrid returns n points from lo to hi, evenly spaced in log scale.
func logGrid(lo, hi float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = lo * math.Pow(hi/lo, float64(i)/float64(n-1))
	}
	return out
}

// linGrid returns n points from lo to hi, evenly spaced.
func linGrid(lo, hi float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = lo + (hi-lo)*float64(i)/float64(n-1)
	}
	return out
}

var fig1Sigmas = []float64{0.5, 0.75, 1, 1.5, 2}

// allocationKey explains the line styles of fig1 and fig3: one per method.
var allocationKey = []plots.KeyEntry{
	{Name: "Berry–Esseen bound (Theorem 4.1)", Style: plots.Solid},
	{Name: "exact value", Style: plots.Dashed},
	{Name: "chi-square bound", Style: plots.Dotted},
}

// fig1 is van Dijk & Ertan's Figure 1: the one-epoch δ (a TV) against M for several σ,
// with the exact and chi-square values beside the Berry–Esseen bound.
func (f *plotFlags) fig1() ([]plots.Figure, error) {
	n := 29
	if f.quick {
		n = 5
	}
	ms := logGrid(1e2, 1e9, n)
	fig := plots.Figure{
		Title:    "Privacy of one epoch of random allocation: δ against the number of rounds M",
		Subtitle: "δ is the total variation distance after one epoch; colours: noise multiplier σ. After Figure 1 of van Dijk & Ertan.",
		XLabel:   "rounds (steps) per epoch M", YLabel: "δ (total variation, one epoch)", LogX: true, LogY: true,
		Key: allocationKey,
	}
	for i, sigma := range fig1Sigmas {
		var be, ex, cs plots.Series
		be.Name = fmt.Sprintf("σ = %g", sigma) // one legend entry per colour; the line style is the method
		be.Color, ex.Color, cs.Color = i, i, i
		be.Style, ex.Style, cs.Style = plots.Solid, plots.Dashed, plots.Dotted
		for _, mf := range ms {
			m := int(math.Round(mf))
			if d, err := allocation.BerryEsseenDelta(sigma, m, 1, allocation.RhoSimplified); err == nil && d < 1 {
				be.X, be.Y = append(be.X, mf), append(be.Y, d)
			} else if err != nil && !errors.Is(err, privacy.ErrOutOfRegime) {
				return nil, err
			}
			d, err := allocation.ExactTVEpoch(sigma, m)
			if err != nil {
				return nil, err
			}
			ex.X, ex.Y = append(ex.X, mf), append(ex.Y, d)
			d, err = allocation.ChiSquareTV(sigma, m, 1)
			if err != nil {
				return nil, err
			}
			cs.X, cs.Y = append(cs.X, mf), append(cs.Y, d)
		}
		fig.Series = append(fig.Series, be, ex, cs)
	}
	return []plots.Figure{fig}, nil
}

// fig2 is van Dijk & Ertan's Figure 2: the asymptotic μ-GDP coefficients per unit
// c = √(E/M) (random allocation, Theorem 5.2, against uniform subsampling),
// and their ratio, which is (1+√2)/2 at σ ≈ 1.668.
func (f *plotFlags) fig2() ([]plots.Figure, error) {
	n := 200
	if f.quick {
		n = 10
	}
	sigmas := linGrid(0.3, 5, n)
	var alloc, sub, ratio, ref plots.Series
	alloc.Name, sub.Name = "random allocation (= Poisson, CLT): √(exp(1/σ²) − 1)", "uniform subsampling (Dong, Roth & Su, Cor. 5.4)"
	ratio.Name, ref.Name = "ratio of the two coefficients", "(1+√2)/2 ≈ 1.207"
	ref.Style = plots.Dashed
	for _, s := range sigmas {
		a, b := allocation.MuAllocation(s, 1), allocation.MuSubsampled(s, 1)
		alloc.X, alloc.Y = append(alloc.X, s), append(alloc.Y, a)
		sub.X, sub.Y = append(sub.X, s), append(sub.Y, b)
		ratio.X, ratio.Y = append(ratio.X, s), append(ratio.Y, b/a)
		ref.X, ref.Y = append(ref.X, s), append(ref.Y, (1+math.Sqrt2)/2)
	}
	ref.Color = 3
	coef := plots.Figure{
		Title:    "Asymptotic μ-GDP of E epochs of M rounds, per unit √(E/M), against σ",
		Subtitle: "Smaller μ is more private. An asymptotic estimate, not a privacy bound. After Figure 2 of van Dijk & Ertan.",
		XLabel:   "noise multiplier σ", YLabel: "μ / √(E/M)", LogY: true, Series: []plots.Series{alloc, sub},
	}
	rat := plots.Figure{
		Title:    "How much larger uniform subsampling's μ is than random allocation's",
		Subtitle: "The ratio of the two coefficients on the left; it crosses (1+√2)/2 at σ ≈ 1.668.",
		XLabel:   "noise multiplier σ", YLabel: "μ(uniform subsampling) / μ(random allocation)", Series: []plots.Series{ratio, ref},
	}
	return []plots.Figure{coef, rat}, nil
}

// fig3 is van Dijk & Ertan's Figure 3: the rounds M one epoch needs for δ (a TV) at
// each σ, by Berry–Esseen, chi-square and the exact TV.
func (f *plotFlags) fig3() ([]plots.Figure, error) {
	n, nExact := 40, 12
	if f.quick {
		n, nExact = 4, 3
	}
	fig := plots.Figure{
		Title:    "Rounds per epoch M needed to reach a target δ, against the noise multiplier σ",
		Subtitle: "δ is the total variation distance after one epoch of random allocation; colours: target δ. After Figure 3 of van Dijk & Ertan.",
		XLabel:   "noise multiplier σ", YLabel: "rounds per epoch M needed", LogY: true,
		Key: allocationKey,
	}
	for i, delta := range []float64{1e-2, 1e-3, 1e-4} {
		var be, ex, cs plots.Series
		be.Name = fmt.Sprintf("target δ = %s", bench.Num(delta))
		be.Color, ex.Color, cs.Color = i, i, i
		be.Style, ex.Style, cs.Style = plots.Solid, plots.Dashed, plots.Dotted
		for _, s := range linGrid(0.6, 3, n) {
			m, err := allocation.BerryEsseenRounds(s, delta, 1, allocation.RhoSimplified)
			if err == nil {
				be.X, be.Y = append(be.X, s), append(be.Y, float64(m))
			} else if !errors.Is(err, privacy.ErrUnreachable) && !errors.Is(err, privacy.ErrOutOfRegime) {
				return nil, err
			}
			m, err = allocation.ChiSquareRounds(s, delta, 1)
			if err != nil {
				return nil, err
			}
			cs.X, cs.Y = append(cs.X, s), append(cs.Y, float64(m))
		}
		for _, s := range linGrid(0.6, 3, nExact) {
			m, err := allocation.ExactRounds(s, delta, 1)
			if err != nil {
				return nil, err
			}
			ex.X, ex.Y = append(ex.X, s), append(ex.Y, float64(m))
		}
		fig.Series = append(fig.Series, be, ex, cs)
	}
	return []plots.Figure{fig}, nil
}

// runSpec is the accounting of a run described by the plot flags.
func (f *plotFlags) runSpec(name string) (accounting.Spec, int) {
	spec := accounting.Spec{Sampler: name, Sigma: f.sigma}
	switch name {
	case privacy.SamplerPoisson, privacy.SamplerPoissonTruncated:
		spec.SampleRate = float64(f.batch) / float64(f.datasetSize)
		spec.DatasetSize = f.datasetSize
		q := spec.SampleRate
		spec.MaxBatch = sampler.DefaultMaxBatch(f.datasetSize, q)
		return spec, sampler.PoissonSteps(q)
	case privacy.SamplerShuffle:
		spec.Rounds = sampler.ShuffleSteps(f.datasetSize, f.batch)
	default:
		spec.Rounds = sampler.AllocationSteps(f.datasetSize, f.batch)
	}
	spec.SampleRate = 1 / float64(spec.Rounds)
	return spec, spec.Rounds
}

// tradeoff draws the trade-off curves (type I error α against type II error β)
// of a run under every method available for its sampler.
func (f *plotFlags) tradeoff() ([]plots.Figure, error) {
	epochs := f.epochs
	if epochs == 0 {
		epochs = 5
	}
	base, perEpoch := f.runSpec(f.sampler)
	steps := epochs * perEpoch
	fig := plots.Figure{
		Title: fmt.Sprintf("Trade-off curves of %d epochs of %s sampling at noise multiplier σ = %s", epochs, f.sampler, bench.Num(f.sigma)),
		Subtitle: fmt.Sprintf("%d steps per epoch (N = %d, batch %d), one curve per accountant. Each curve is the least type II error of any membership test at each type I error: higher is more private. Dashed: not a guarantee (an approximation or a lower bound).",
			perEpoch, f.datasetSize, f.batch),
		XLabel: "type I error α (false positive rate of a membership test)", YLabel: "type II error β (false negative rate)",
	}
	grid := fdp.DefaultEpsGrid()
	if f.quick {
		grid = linGrid(0, 10, 20)
	}
	for i, m := range accounting.Methods(f.sampler) {
		spec := base
		spec.Method = m
		kind, _ := spec.Kind()
		if kind == accounting.KindAssumesPoisson || (f.sampler == privacy.SamplerShuffle && m == accounting.MethodDeterministic) {
			continue // not valid for the sampler, or the same bound as shuffle's gdp
		}
		acc, err := spec.New()
		if err != nil {
			return nil, err
		}
		curve, err := fdp.FromAccountant(acc, steps, grid)
		if m == accounting.MethodChiSquare && err == nil {
			// The chi-square bound is sharper than its TV alone: Prop. B.2
			// (Ertan & van Dijk 2026) bounds the whole curve.
			c, cerr := allocation.ChiSquare(spec.Sigma, spec.Rounds, epochs)
			if cerr != nil {
				return nil, cerr
			}
			tvCurve := curve
			curve = func(a float64) float64 { return math.Max(tvCurve(a), allocation.ChiSquareTradeOff(c, a)) }
		}
		if err != nil {
			if errors.Is(err, privacy.ErrOutOfRegime) {
				continue
			}
			return nil, fmt.Errorf("%s: %w", m, err)
		}
		s := plots.Series{Name: fmt.Sprintf("%s (%s)", m, kind), Color: i}
		if kind != accounting.KindGuarantee {
			s.Style = plots.Dashed
		}
		if kind == accounting.KindLowerBound {
			s.Name = fmt.Sprintf("%s (lower bound: the true curve lies on or below it)", m)
		}
		top := 0.0
		for _, a := range linGrid(0, 1, 201) {
			s.X, s.Y = append(s.X, a), append(s.Y, curve(a))
			top = math.Max(top, curve(a))
		}
		if top == 0 {
			s.Name += ": vacuous here (β = 0)"
		}
		fig.Series = append(fig.Series, s)
	}
	ref := plots.Series{Name: "perfect privacy: β = 1 − α", Style: plots.Dotted, Color: 7, X: []float64{0, 1}, Y: []float64{1, 0}}
	fig.Series = append(fig.Series, ref)
	return []plots.Figure{fig}, nil
}

// samplers draws ε (at δ) after each epoch for shuffle, Poisson and random
// allocation at the same σ, N and batch size: each sampler with its own proven
// accountant, shuffle's lower bound dashed.
func (f *plotFlags) samplers() ([]plots.Figure, error) {
	last := f.epochs
	if last == 0 {
		last = 30
	}
	if f.quick {
		last = min(last, 3)
	}
	fig := plots.Figure{
		Title: "Privacy loss ε after each epoch: shuffling, Poisson sampling and random allocation",
		Subtitle: fmt.Sprintf("N = %d examples, expected batch %d, noise multiplier σ = %s; each sampler under its own accountants. Dashed: a lower bound, not a guarantee.",
			f.datasetSize, f.batch, bench.Num(f.sigma)),
		XLabel: "epochs (passes over the N examples)", YLabel: fmt.Sprintf("ε at δ = %s", bench.Num(f.delta)), LogY: true,
	}
	lines := []struct{ sampler, method string }{
		{privacy.SamplerShuffle, accounting.MethodGDP},
		{privacy.SamplerShuffle, accounting.MethodLower},
		{privacy.SamplerPoisson, accounting.MethodPLD},
		{privacy.SamplerPoisson, accounting.MethodRDP},
		{privacy.SamplerAllocation, accounting.MethodExact},
		{privacy.SamplerAllocation, accounting.MethodRDP},
	}
	for i, l := range lines {
		spec, perEpoch := f.runSpec(l.sampler)
		spec.Method = l.method
		acc, err := spec.New()
		if err != nil {
			return nil, err
		}
		kind, _ := spec.Kind()
		s := plots.Series{Name: fmt.Sprintf("%s, %s (%s)", l.sampler, l.method, kind), Color: i}
		if kind == accounting.KindLowerBound {
			s.Name = fmt.Sprintf("%s, lower bound: the true ε is at least this", l.sampler)
		}
		if kind != accounting.KindGuarantee {
			s.Style = plots.Dashed
		}
		for e := 1; e <= last; e++ {
			eps, err := acc.Epsilon(e*perEpoch, f.delta)
			if err != nil {
				return nil, fmt.Errorf("%s/%s after %d epochs: %w", l.sampler, l.method, e, err)
			}
			if eps > 0 {
				s.X, s.Y = append(s.X, float64(e)), append(s.Y, eps)
			}
		}
		fig.Series = append(fig.Series, s)
	}
	return []plots.Figure{fig}, nil
}
