package allocation

import (
	"math"
)

// cfRelClose reports |got − want| ≤ rel·|want|.
func cfRelClose(got, want, rel float64) bool {
	return math.Abs(got-want) <= rel*math.Abs(want)
}

// cfSimpson integrates f on [a, b] with n (even) panels.
func cfSimpson(f func(float64) float64, a, b float64, n int) float64 {
	h := (b - a) / float64(n)
	s := f(a) + f(b)
	for i := 1; i < n; i++ {
		w := 2.0
		if i%2 == 1 {
			w = 4
		}
		s += w * f(a+float64(i)*h)
	}
	return s * h / 3
}

// cfLognormalMoment integrates g(Y) φ(x) over x for Y = e^{tx − t²/2}, by
// Simpson on [−14, 14 + 3t] (the window used for the reference values).
func cfLognormalMoment(t float64, g func(y float64) float64) float64 {
	f := func(x float64) float64 {
		return g(math.Exp(t*x-t*t/2)) * math.Exp(-x*x/2) / math.Sqrt(2*math.Pi)
	}
	return cfSimpson(f, -14, 14+3*t+6, 200000)
}
