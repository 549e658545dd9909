package sampler

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// pMin is the p-value below which a goodness-of-fit test fails. Seeds are
// fixed, so every test is deterministic; a sampler with a real bias gives
// p-values many orders of magnitude below this.
const pMin = 1e-4

// zMax is the largest |z| a z-test accepts.
const zMax = 4.5

// chiSquare returns Pearson's statistic of observed counts against expected
// counts, its degrees of freedom (cells − 1 − fitted) and the upper-tail
// p-value from gonum's chi-square distribution.
func chiSquare(obs, exp []float64, fitted int) (stat float64, df int, p float64) {
	for i := range obs {
		d := obs[i] - exp[i]
		stat += d * d / exp[i]
	}
	df = len(obs) - 1 - fitted
	return stat, df, distuv.ChiSquared{K: float64(df)}.Survival(stat)
}

// requireChiSquare fails the test when the counts do not fit the expected
// counts at level pMin.
func requireChiSquare(t *testing.T, what string, obs, exp []float64) {
	t.Helper()
	stat, df, p := chiSquare(obs, exp, 0)
	if !(p > pMin) {
		t.Errorf("%s: chi-square %.2f on %d df, p = %.3g < %g", what, stat, df, p, pMin)
	} else {
		t.Logf("%s: chi-square %.2f on %d df, p = %.3g", what, stat, df, p)
	}
}

// requireZ fails the test when |(got − want)/sd| > zMax.
func requireZ(t *testing.T, what string, got, want, sd float64) {
	t.Helper()
	z := (got - want) / sd
	if !(math.Abs(z) <= zMax) {
		t.Errorf("%s: got %.6g, want %.6g (sd %.3g): z = %.2f", what, got, want, sd, z)
	} else {
		t.Logf("%s: got %.6g, want %.6g: z = %.2f", what, got, want, z)
	}
}

// mergeBins pools adjacent cells (in order) so that every pooled cell has an
// expected count of at least 5, the usual validity condition of Pearson's
// test. The last cell, if short, is merged into the one before it.
func mergeBins(obs, exp []float64) (o, e []float64) {
	var co, ce float64
	for i := range exp {
		co += obs[i]
		ce += exp[i]
		if ce >= 5 {
			o = append(o, co)
			e = append(e, ce)
			co, ce = 0, 0
		}
	}
	if ce > 0 || co > 0 {
		if len(e) == 0 {
			return []float64{co}, []float64{ce}
		}
		o[len(o)-1] += co
		e[len(e)-1] += ce
	}
	return o, e
}

// requireBinomialSizes checks that the sizes are draws of Binomial(n, p), by
// a chi-square test over all of 0..n against gonum's Binomial pmf, with
// pooled sparse cells.
func requireBinomialSizes(t *testing.T, what string, sizes []int, n int, p float64) {
	t.Helper()
	obs := make([]float64, n+1)
	for _, k := range sizes {
		obs[k]++
	}
	exp := make([]float64, n+1)
	b := distuv.Binomial{N: float64(n), P: p}
	for k := range exp {
		exp[k] = float64(len(sizes)) * b.Prob(float64(k))
	}
	o, e := mergeBins(obs, exp)
	requireChiSquare(t, what, o, e)
}

// meanVar returns the sample mean and the unbiased sample variance.
func meanVar(x []int) (mean, variance float64) {
	for _, v := range x {
		mean += float64(v)
	}
	mean /= float64(len(x))
	for _, v := range x {
		d := float64(v) - mean
		variance += d * d
	}
	return mean, variance / float64(len(x)-1)
}

// requireBinomialMoments z-tests the sample mean and variance of the sizes
// against those of Binomial(n, p). The variance test uses the large-sample
// standard error sqrt((μ₄ − σ⁴)/S), with the binomial fourth central moment
// μ₄ = σ²(1 + 3(n−2)p(1−p)).
func requireBinomialMoments(t *testing.T, what string, sizes []int, n int, p float64) {
	t.Helper()
	s := float64(len(sizes))
	mu := float64(n) * p
	v := mu * (1 - p)
	mean, variance := meanVar(sizes)
	requireZ(t, what+" mean", mean, mu, math.Sqrt(v/s))
	mu4 := v * (1 + 3*(float64(n)-2)*p*(1-p))
	requireZ(t, what+" variance", variance, v, math.Sqrt((mu4-v*v)/s))
}

// TestHelpersReject checks that the statistical helpers can fail: they must
// reject data from a wrong distribution.
func TestHelpersReject(t *testing.T) {
	// Sizes from Binomial(100, 0.3) tested as Binomial(100, 0.32).
	b := distuv.Binomial{N: 100, P: 0.3, Src: newStream(1, 2, 3, 4)}
	sizes := make([]int, 20000)
	for i := range sizes {
		sizes[i] = int(b.Rand())
	}
	obs := make([]float64, 101)
	for _, k := range sizes {
		obs[k]++
	}
	exp := make([]float64, 101)
	wrong := distuv.Binomial{N: 100, P: 0.32}
	for k := range exp {
		exp[k] = float64(len(sizes)) * wrong.Prob(float64(k))
	}
	o, e := mergeBins(obs, exp)
	if _, _, p := chiSquare(o, e, 0); p > pMin {
		t.Errorf("chi-square accepted Binomial(100, 0.3) data as Binomial(100, 0.32): p = %g", p)
	}
	mean, _ := meanVar(sizes)
	if z := (mean - 32) / math.Sqrt(100*0.32*0.68/20000); math.Abs(z) <= zMax {
		t.Errorf("z-test accepted mean %g as 32: z = %g", mean, z)
	}
	// The right distribution passes.
	requireBinomialSizes(t, "gonum Binomial(100, 0.3)", sizes, 100, 0.3)
	requireBinomialMoments(t, "gonum Binomial(100, 0.3)", sizes, 100, 0.3)
}

// requireChiSquareDF fails the test when a statistic that is χ² with df
// degrees of freedom under the hypothesis has p-value below pMin.
func requireChiSquareDF(t *testing.T, what string, stat float64, df int) {
	t.Helper()
	p := distuv.ChiSquared{K: float64(df)}.Survival(stat)
	if !(p > pMin) {
		t.Errorf("%s: chi-square %.2f on %d df, p = %.3g < %g", what, stat, df, p, pMin)
	} else {
		t.Logf("%s: chi-square %.2f on %d df, p = %.3g", what, stat, df, p)
	}
}

// requireZQuiet is requireZ without logging on success (for many tests).
func requireZQuiet(t *testing.T, what string, got, want, sd float64) {
	t.Helper()
	if z := (got - want) / sd; !(math.Abs(z) <= zMax) {
		t.Errorf("%s: got %.6g, want %.6g (sd %.3g): z = %.2f", what, got, want, sd, z)
	}
}
