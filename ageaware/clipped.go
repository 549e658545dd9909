package ageaware

import "math"

// clippedLaplaceMoments returns M_j = E[D^j], j = 1…4, of D = clamp(N, −a, b)
// for N Laplace with scale eta (density e^{−|x|/η}/(2η)) and a, b ≥ 0: the
// moments of clip(w + N, lo, hi) − w with a = w − lo, b = hi − w, the noisy
// upload of a client whose estimate is w, projected on its hypothesis class
// [lo, hi]. In closed form,
//
//	M_j = (−a)^j·½e^{−a/η} + b^j·½e^{−b/η}
//	    + ½η^j·j!·(P(j+1, b/η) + (−1)^j·P(j+1, a/η)),
//
// P the regularized lower incomplete gamma function. eta = 0 gives D = 0.
func clippedLaplaceMoments(a, b, eta float64) [4]float64 {
	var m [4]float64
	if eta == 0 {
		return m
	}
	ea, eb := math.Exp(-a/eta), math.Exp(-b/eta)
	pa, pb := lowerGammaInts(a/eta), lowerGammaInts(b/eta)
	fact := 1.0
	etaJ := 1.0
	na, bj := 1.0, 1.0 // (−a)^j, b^j
	sign := 1.0
	for j := 1; j <= 4; j++ {
		fact *= float64(j)
		etaJ *= eta
		na *= -a
		bj *= b
		sign = -sign
		m[j-1] = 0.5*(na*ea+bj*eb) + 0.5*etaJ*fact*(pb[j-1]+sign*pa[j-1])
	}
	return m
}

// lowerGammaInts returns P(j+1, x) for j = 1…4, the regularized lower
// incomplete gamma function at integer order, P(j+1, x) = 1 − e^{−x}Σ_{k≤j}
// x^k/k!: by that sum for x ≥ 1, and by the series e^{−x}Σ_{k>j} x^k/k! for
// x < 1, where the sum would cancel.
func lowerGammaInts(x float64) [4]float64 {
	var p [4]float64
	if x == 0 {
		return p
	}
	if math.IsInf(x, 1) {
		return [4]float64{1, 1, 1, 1}
	}
	ex := math.Exp(-x)
	if x >= 1 {
		term, sum := 1.0, 1.0
		for k := 1; k <= 4; k++ {
			term *= x / float64(k)
			sum += term
			p[k-1] = 1 - ex*sum
		}
		return p
	}
	// Tail sums t_j = Σ_{k>j} x^k/k!, from a series for t_4 and backwards.
	terms := [6]float64{1} // x^k/k! for k = 0…5
	for k := 1; k <= 5; k++ {
		terms[k] = terms[k-1] * x / float64(k)
	}
	t := 0.0
	term := terms[5]
	for k := 5; term > 1e-18*t || k == 5; k++ {
		t += term
		term *= x / float64(k+1)
	}
	// t = Σ_{k≥5} = t_4.
	p[3] = ex * t
	for j := 3; j >= 1; j-- {
		t += terms[j+1]
		p[j-1] = ex * t
	}
	return p
}
