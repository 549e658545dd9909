package ageaware

import (
	"fmt"
	"math"
	"sort"

	"github.com/dpsgd/dpsgd/privacy"
	"gonum.org/v1/gonum/mat"
)

// Eigenvalues returns the eigenvalues of a reversible chain's transition
// matrix in decreasing order (the first is 1). A reversible P is similar to
// the symmetric S = D^{1/2} P D^{-1/2}, D = diag(π), so its eigenvalues are
// real; they are computed from S with gonum's symmetric eigensolver. A chain
// that is not reversible is refused (wrapping privacy.ErrOutOfRegime): its
// eigenvalues may be complex and do not give the bound of SpectralBound.
func (c *Chain) Eigenvalues() ([]float64, error) {
	if !c.reversible {
		return nil, fmt.Errorf("ageaware: the chain is not reversible (π(x)P(x, y) ≠ π(y)P(y, x)), want a reversible chain for the spectral bound: %w", privacy.ErrOutOfRegime)
	}
	n := c.n
	s := mat.NewSymDense(n, nil)
	for x := 0; x < n; x++ {
		for y := x; y < n; y++ {
			a := math.Sqrt(c.pi[x]/c.pi[y]) * c.p[x*n+y]
			b := math.Sqrt(c.pi[y]/c.pi[x]) * c.p[y*n+x]
			s.SetSym(x, y, (a+b)/2)
		}
	}
	var es mat.EigenSym
	if ok := es.Factorize(s, false); !ok {
		return nil, fmt.Errorf("ageaware: symmetric eigendecomposition did not converge")
	}
	ev := es.Values(nil)
	sort.Sort(sort.Reverse(sort.Float64Slice(ev)))
	return ev, nil
}

// AbsSpectralGamma returns γ* = max{λ₂, |λ_min|}, one minus the absolute
// spectral gap of a reversible chain (λ₂ the second largest eigenvalue, λ_min
// the smallest; 0 for a one-state chain). See Eigenvalues for the
// reversibility requirement.
func (c *Chain) AbsSpectralGamma() (float64, error) {
	ev, err := c.Eigenvalues()
	if err != nil {
		return 0, err
	}
	if len(ev) < 2 {
		return 0, nil
	}
	g := math.Max(ev[1], math.Abs(ev[len(ev)-1]))
	return math.Min(g, 1), nil
}

// SpectralBound returns the upper bound on Δ(t) used in Lin et al.'s Section IV
// ([12, Prop. 5]):
//
//	Δ(t) ≤ min{1, max_x √((1 − π(x))/π(x)) · γ*ᵗ}.
//
// It holds for reversible chains, where P̂_t = Pᵗ and each row is within
// ½√((1−π(x))/π(x))·γ*ᵗ of π in total variation (Levin, Peres & Wilmer,
// Markov Chains and Mixing Times, 2nd ed., §12.2); the triangle inequality
// gives the bound on the distance between two rows. For a chain that is not
// reversible it returns an error wrapping privacy.ErrOutOfRegime (use Delta,
// which is exact for every irreducible chain). An age t < 0 is an error.
func (c *Chain) SpectralBound(t int) (float64, error) {
	if err := checkAge("age", t); err != nil {
		return 0, err
	}
	g, err := c.AbsSpectralGamma()
	if err != nil {
		return 0, err
	}
	return c.spectralBound(g, t), nil
}

// SpectralBoundCurve returns SpectralBound(t) for t = 0, …, maxAge.
func (c *Chain) SpectralBoundCurve(maxAge int) ([]float64, error) {
	if err := checkAge("maxAge", maxAge); err != nil {
		return nil, err
	}
	g, err := c.AbsSpectralGamma()
	if err != nil {
		return nil, err
	}
	out := make([]float64, maxAge+1)
	for t := range out {
		out[t] = c.spectralBound(g, t)
	}
	return out, nil
}

func (c *Chain) spectralBound(g float64, t int) float64 {
	k := 0.0
	for _, p := range c.pi {
		k = math.Max(k, math.Sqrt((1-p)/p))
	}
	if t == 0 {
		// γ*⁰ = 1 even when γ* = 0.
		return math.Min(1, k)
	}
	if g == 0 || k == 0 {
		return 0
	}
	return math.Min(1, math.Exp(math.Log(k)+float64(t)*math.Log(g)))
}
