package audit

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/mathext"
)

// ClopperPearson returns the exact one-sided binomial confidence bounds for a proportion
// from k successes in n trials (0 ≤ k ≤ n, n ≥ 1) at error level alpha in (0, 1): lo is
// the (1 − alpha) lower bound, the alpha quantile of Beta(k, n − k + 1) (0 when k = 0), and
// hi the (1 − alpha) upper bound, the 1 − alpha quantile of Beta(k + 1, n − k) (1 when
// k = n) (Clopper & Pearson 1934). Equivalently P(Bin(n, hi) ≤ k) = alpha and
// P(Bin(n, lo) ≥ k) = alpha. [lo, hi] is a two-sided interval at level 1 − 2·alpha.
func ClopperPearson(k, n int, alpha float64) (lo, hi float64, err error) {
	if n < 1 {
		return 0, 0, fmt.Errorf("audit: Clopper–Pearson: n = %d out of range [1, +Inf)", n)
	}
	if k < 0 || k > n {
		return 0, 0, fmt.Errorf("audit: Clopper–Pearson: k = %d out of range [0, n = %d]", k, n)
	}
	if !(alpha > 0 && alpha < 1) {
		return 0, 0, fmt.Errorf("audit: Clopper–Pearson: alpha = %v out of range (0, 1)", alpha)
	}
	lo, hi = 0, 1
	if k > 0 {
		lo = mathext.InvRegIncBeta(float64(k), float64(n-k+1), alpha)
	}
	if k < n {
		hi = mathext.InvRegIncBeta(float64(k+1), float64(n-k), 1-alpha)
	}
	return lo, hi, nil
}

// EpsilonFromRates returns the largest ε that a test with false-positive rate fpr and
// false-negative rate fnr proves at delta: any (ε, δ)-DP mechanism has
// 1 − FNR ≤ e^ε·FPR + δ and 1 − FPR ≤ e^ε·FNR + δ (Kairouz, Oh & Viswanath 2015, the
// hypothesis-testing view of DP), so
//
//	ε ≥ max{ ln((1 − δ − FPR)/FNR), ln((1 − δ − FNR)/FPR), 0 }.
//
// A zero rate against a positive numerator gives +Inf. The value is non-increasing in fpr
// and in fnr, which is what makes upper confidence bounds on the rates give a lower
// confidence bound on ε.
func EpsilonFromRates(fpr, fnr, delta float64) float64 {
	eps := 0.0
	for _, p := range [2][2]float64{{fpr, fnr}, {fnr, fpr}} {
		num := 1 - delta - p[0]
		if num <= 0 {
			continue
		}
		if p[1] <= 0 {
			return math.Inf(1)
		}
		eps = math.Max(eps, math.Log(num/p[1]))
	}
	return eps
}

// Estimate is the empirical ε of one threshold test.
type Estimate struct {
	// Point is EpsilonFromRates at the measured rates (+Inf when a rate is 0).
	Point float64
	// Low and High are EpsilonFromRates at the Clopper–Pearson upper and lower bounds of
	// the two rates, each one-sided at level 1 − (1 − Confidence)/4: with probability at
	// least Confidence the true ε of the test lies in [Low, High], and the mechanism's ε is
	// at least Low. High may be +Inf.
	Low, High float64
	// Threshold is τ of the test "score > τ ⇒ canary", chosen on the selection half.
	Threshold float64
	// FP, FN count the errors on the evaluation half, of N0 and N1 runs.
	FP, FN, N0, N1 int
	Confidence     float64
}

// FPR and FNR are the measured rates on the evaluation half.
func (e Estimate) FPR() float64 { return float64(e.FP) / float64(e.N0) }

// FNR is the measured false-negative rate on the evaluation half.
func (e Estimate) FNR() float64 { return float64(e.FN) / float64(e.N1) }

// EmpiricalEpsilon turns the scores of runs without (s0) and with (s1) the canary (higher
// means "canary") into an empirical ε at delta. The first half of each slice selects the
// threshold τ that maximizes the lower bound on that half; the second half, independent of
// the choice, measures the chosen test, so the returned interval holds at confidence
// without any correction for the selection. Each slice needs at least 2 scores; NaN scores
// are an error.
func EmpiricalEpsilon(s0, s1 []float64, delta, confidence float64) (Estimate, error) {
	if len(s0) < 2 || len(s1) < 2 {
		return Estimate{}, fmt.Errorf("audit: EmpiricalEpsilon: %d and %d scores, want at least 2 per world", len(s0), len(s1))
	}
	if !(delta >= 0 && delta < 1) {
		return Estimate{}, fmt.Errorf("audit: EmpiricalEpsilon: delta = %v out of range [0, 1)", delta)
	}
	if !(confidence > 0 && confidence < 1) {
		return Estimate{}, fmt.Errorf("audit: EmpiricalEpsilon: confidence = %v out of range (0, 1)", confidence)
	}
	for _, s := range [][]float64{s0, s1} {
		for i, v := range s {
			if math.IsNaN(v) {
				return Estimate{}, fmt.Errorf("audit: EmpiricalEpsilon: score %d is NaN", i)
			}
		}
	}
	alpha := (1 - confidence) / 4
	h0, h1 := len(s0)/2, len(s1)/2
	tau, err := selectThreshold(s0[:h0], s1[:h1], delta, alpha)
	if err != nil {
		return Estimate{}, err
	}
	e0, e1 := s0[h0:], s1[h1:]
	est := Estimate{Threshold: tau, N0: len(e0), N1: len(e1), Confidence: confidence}
	for _, v := range e0 {
		if v > tau {
			est.FP++
		}
	}
	for _, v := range e1 {
		if v <= tau {
			est.FN++
		}
	}
	fpLo, fpHi, err := ClopperPearson(est.FP, est.N0, alpha)
	if err != nil {
		return Estimate{}, err
	}
	fnLo, fnHi, err := ClopperPearson(est.FN, est.N1, alpha)
	if err != nil {
		return Estimate{}, err
	}
	est.Point = EpsilonFromRates(est.FPR(), est.FNR(), delta)
	est.Low = EpsilonFromRates(fpHi, fnHi, delta)
	est.High = EpsilonFromRates(fpLo, fnLo, delta)
	return est, nil
}

// selectThreshold returns the τ, among the midpoints between consecutive distinct pooled
// scores (and below and above all of them), whose Clopper–Pearson lower bound on ε is the
// largest on (s0, s1); ties go to the smaller τ.
func selectThreshold(s0, s1 []float64, delta, alpha float64) (float64, error) {
	type pt struct {
		v     float64
		world int
	}
	pts := make([]pt, 0, len(s0)+len(s1))
	for _, v := range s0 {
		pts = append(pts, pt{v, 0})
	}
	for _, v := range s1 {
		pts = append(pts, pt{v, 1})
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].v < pts[j].v })
	n0, n1 := len(s0), len(s1)
	// Clopper–Pearson upper bounds for every count, computed once.
	hi0, hi1 := make([]float64, n0+1), make([]float64, n1+1)
	for k := range hi0 {
		_, h, err := ClopperPearson(k, n0, alpha)
		if err != nil {
			return 0, err
		}
		hi0[k] = h
	}
	for k := range hi1 {
		_, h, err := ClopperPearson(k, n1, alpha)
		if err != nil {
			return 0, err
		}
		hi1[k] = h
	}
	// τ below every score: FP = n0, FN = 0.
	fp, fn := n0, 0
	bestTau, best := pts[0].v-1, EpsilonFromRates(hi0[fp], hi1[fn], delta)
	for i := 0; i < len(pts); {
		j := i
		for j < len(pts) && pts[j].v == pts[i].v {
			if pts[j].world == 0 {
				fp--
			} else {
				fn++
			}
			j++
		}
		tau := pts[i].v + 1
		if j < len(pts) {
			tau = pts[i].v + (pts[j].v-pts[i].v)/2
		}
		if e := EpsilonFromRates(hi0[fp], hi1[fn], delta); e > best {
			best, bestTau = e, tau
		}
		i = j
	}
	return bestTau, nil
}
