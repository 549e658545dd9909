package ageaware

import (
	"fmt"
	"math"

	"github.com/dpsgd/dpsgd/privacy"
	"gonum.org/v1/gonum/mat"
)

// RowSumTol is the largest |Σ_y P(x, y) − 1| that NewChain accepts; rows
// within it are rescaled to sum to 1 exactly.
const RowSumTol = 1e-9

// reversibleTol is the relative tolerance of the detailed-balance check
// π(x)P(x, y) = π(y)P(y, x).
const reversibleTol = 1e-9

// Chain is a validated finite, irreducible Markov chain: a square transition
// matrix with finite non-negative entries and rows summing to 1, whose states
// all communicate, so that its stationary law π is unique and positive.
// A Chain is immutable and safe for concurrent use.
type Chain struct {
	n          int
	p          []float64 // row-major n×n transition matrix
	pi         []float64 // stationary law
	reversible bool
}

// NewChain validates rows as a transition matrix, P(x, y) = rows[x][y], and
// returns the chain. It refuses (wrapping privacy.ErrInvalidArgument and naming
// the row or entry) a matrix that is empty or not square, has an entry that is
// negative, NaN or infinite, has a row whose sum is off 1 by more than
// RowSumTol, or is reducible (some state cannot reach another: then the
// stationary law is not unique or not positive, and the reverse chain of
// Lin et al. is undefined). Rows within RowSumTol of 1 are rescaled
// to sum to 1.
func NewChain(rows [][]float64) (*Chain, error) {
	n := len(rows)
	if n == 0 {
		return nil, fmt.Errorf("ageaware: transition matrix has no rows, want a square matrix with at least 1 state: %w", privacy.ErrInvalidArgument)
	}
	c := &Chain{n: n, p: make([]float64, n*n)}
	for x, row := range rows {
		if len(row) != n {
			return nil, fmt.Errorf("ageaware: transition matrix row %d has %d entries, want %d (a square matrix): %w", x, len(row), n, privacy.ErrInvalidArgument)
		}
		sum, y := normalizeLaw(c.p[x*n:(x+1)*n], row)
		if y >= 0 {
			return nil, fmt.Errorf("ageaware: transition matrix entry (%d, %d) = %v, want a finite number in [0, 1]: %w", x, y, row[y], privacy.ErrInvalidArgument)
		}
		if math.Abs(sum-1) > RowSumTol {
			return nil, fmt.Errorf("ageaware: transition matrix row %d sums to %.12g, want 1 (within %g): %w", x, sum, RowSumTol, privacy.ErrInvalidArgument)
		}
	}
	if x, y, ok := c.unreachable(); !ok {
		return nil, fmt.Errorf("ageaware: transition matrix is reducible: state %d cannot reach state %d, want an irreducible chain (a unique, positive stationary law): %w", x, y, privacy.ErrInvalidArgument)
	}
	c.pi = gth(n, c.p)
	c.reversible = c.detailedBalance()
	return c, nil
}

// unreachable reports a pair (x, y) such that x cannot reach y, or ok = true
// when every state reaches every other (the graph of P(x, y) > 0 is strongly
// connected: 0 reaches every state and every state reaches 0).
func (c *Chain) unreachable() (x, y int, ok bool) {
	reach := func(forward bool) []bool {
		seen := make([]bool, c.n)
		seen[0] = true
		stack := []int{0}
		for len(stack) > 0 {
			u := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for v := 0; v < c.n; v++ {
				w := c.p[u*c.n+v]
				if !forward {
					w = c.p[v*c.n+u]
				}
				if w > 0 && !seen[v] {
					seen[v] = true
					stack = append(stack, v)
				}
			}
		}
		return seen
	}
	from0, to0 := reach(true), reach(false)
	for s := 0; s < c.n; s++ {
		if !from0[s] {
			return 0, s, false
		}
		if !to0[s] {
			return s, 0, false
		}
	}
	return 0, 0, true
}

// gth returns the stationary law of the irreducible row-stochastic n×n matrix
// p by the Grassmann–Taksar–Heyman elimination (Grassmann, Taksar & Heyman
// 1985), which subtracts nothing and so keeps full relative accuracy even for
// nearly decomposable chains.
func gth(n int, p []float64) []float64 {
	a := append([]float64(nil), p...)
	for k := n - 1; k >= 1; k-- {
		s := 0.0
		for j := 0; j < k; j++ {
			s += a[k*n+j]
		}
		for i := 0; i < k; i++ {
			a[i*n+k] /= s
		}
		for i := 0; i < k; i++ {
			aik := a[i*n+k]
			if aik == 0 {
				continue
			}
			for j := 0; j < k; j++ {
				a[i*n+j] += aik * a[k*n+j]
			}
		}
	}
	pi := make([]float64, n)
	pi[0] = 1
	total := 1.0
	for k := 1; k < n; k++ {
		s := 0.0
		for i := 0; i < k; i++ {
			s += pi[i] * a[i*n+k]
		}
		pi[k] = s
		total += s
	}
	for i := range pi {
		pi[i] /= total
	}
	return pi
}

// detailedBalance reports whether π(x)P(x, y) = π(y)P(y, x) for all x, y to
// within a relative 1e-9.
func (c *Chain) detailedBalance() bool {
	for x := 0; x < c.n; x++ {
		for y := x + 1; y < c.n; y++ {
			f, b := c.pi[x]*c.p[x*c.n+y], c.pi[y]*c.p[y*c.n+x]
			if math.Abs(f-b) > reversibleTol*(f+b)+1e-300 {
				return false
			}
		}
	}
	return true
}

// States returns the number of states.
func (c *Chain) States() int { return c.n }

// At returns P(x, y). It panics if x or y is out of range.
func (c *Chain) At(x, y int) float64 {
	if x < 0 || x >= c.n || y < 0 || y >= c.n {
		panic(fmt.Sprintf("ageaware: Chain.At(%d, %d) out of range [0, %d)", x, y, c.n))
	}
	return c.p[x*c.n+y]
}

// Matrix returns a copy of the transition matrix as rows.
func (c *Chain) Matrix() [][]float64 { return rowsOf(c.n, c.p) }

// Stationary returns a copy of the stationary law π (πP = π, Σπ = 1, π > 0).
func (c *Chain) Stationary() []float64 { return append([]float64(nil), c.pi...) }

// Reversible reports whether the chain satisfies detailed balance,
// π(x)P(x, y) = π(y)P(y, x), to a relative 1e-9. Birth–death chains, such as
// Lin et al.'s, are reversible; a reversible chain has real eigenvalues and
// equals its own reverse chain.
func (c *Chain) Reversible() bool { return c.reversible }

func rowsOf(n int, a []float64) [][]float64 {
	out := make([][]float64, n)
	for i := range out {
		out[i] = append([]float64(nil), a[i*n:(i+1)*n]...)
	}
	return out
}

func checkAge(name string, t int) error {
	if t < 0 {
		return fmt.Errorf("ageaware: %s = %d, want an age t >= 0: %w", name, t, privacy.ErrInvalidArgument)
	}
	return nil
}

// power returns Pᵗ (row-major), computed by repeated squaring of the
// non-negative matrix so that structural zeros stay exactly zero.
func (c *Chain) power(t int) []float64 {
	if t == 0 {
		id := make([]float64, c.n*c.n)
		for i := 0; i < c.n; i++ {
			id[i*c.n+i] = 1
		}
		return id
	}
	var m mat.Dense
	m.Pow(mat.NewDense(c.n, c.n, append([]float64(nil), c.p...)), t)
	return m.RawMatrix().Data
}

// deviation returns E_t = Pᵗ − Π (row-major), Π(x, y) = π(y), as (P − Π)ᵗ for
// t ≥ 1 and I − Π for t = 0. Its entries decay geometrically and are computed
// without cancellation against 1, so that Δ(t) keeps its relative accuracy
// when it is tiny.
func (c *Chain) deviation(t int) []float64 {
	n := c.n
	d := make([]float64, n*n)
	if t == 0 {
		for x := 0; x < n; x++ {
			for y := 0; y < n; y++ {
				d[x*n+y] = -c.pi[y]
			}
			d[x*n+x]++
		}
		return d
	}
	for x := 0; x < n; x++ {
		for y := 0; y < n; y++ {
			d[x*n+y] = c.p[x*n+y] - c.pi[y]
		}
	}
	var m mat.Dense
	m.Pow(mat.NewDense(n, n, d), t)
	return m.RawMatrix().Data
}

// Power returns the t-step transition matrix Pᵗ. An age t < 0 is an error.
func (c *Chain) Power(t int) ([][]float64, error) {
	if err := checkAge("age", t); err != nil {
		return nil, err
	}
	return rowsOf(c.n, c.power(t)), nil
}

// Reverse returns the t-step reverse chain of Lin et al. (docs/ageaware.md),
//
//	P̂_t(x, y) = π(y)·Pᵗ(y, x)/π(x),
//
// the law of the state t steps earlier given today's state x. An age t < 0 is
// an error.
func (c *Chain) Reverse(t int) ([][]float64, error) {
	if err := checkAge("age", t); err != nil {
		return nil, err
	}
	pt := c.power(t)
	out := make([][]float64, c.n)
	for x := range out {
		out[x] = make([]float64, c.n)
		for y := range out[x] {
			out[x][y] = c.pi[y] * pt[y*c.n+x] / c.pi[x]
		}
	}
	return out, nil
}

// Delta returns the exact Δ(t) = max_{x,x'} d_TV(P̂_t(x,·), P̂_t(x',·)) of
// Proposition 1 (Lin et al.), d_TV being half the ℓ1 distance.
// Δ(0) = 1 for a chain with at least two states, Δ is non-increasing in t,
// and it tends to 0 for an aperiodic chain. An age t < 0 is an error.
func (c *Chain) Delta(t int) (float64, error) {
	if err := checkAge("age", t); err != nil {
		return 0, err
	}
	return c.deltaAt(t), nil
}

// deltaAt is Δ(t); P̂_0 = I, so Δ(0) is exactly 1 with two states or more.
func (c *Chain) deltaAt(t int) float64 {
	if t == 0 {
		return c.delta0()
	}
	return c.deltaOf(c.deviation(t))
}

func (c *Chain) delta0() float64 {
	if c.n < 2 {
		return 0
	}
	return 1
}

// DeltaCurve returns Δ(0), …, Δ(maxAge) (see Delta). A maxAge < 0 is an error.
func (c *Chain) DeltaCurve(maxAge int) ([]float64, error) {
	if err := checkAge("maxAge", maxAge); err != nil {
		return nil, err
	}
	out := make([]float64, maxAge+1)
	out[0] = c.delta0()
	if maxAge == 0 {
		return out, nil
	}
	n := c.n
	d := make([]float64, n*n)
	for x := 0; x < n; x++ {
		for y := 0; y < n; y++ {
			d[x*n+y] = c.p[x*n+y] - c.pi[y]
		}
	}
	dm := mat.NewDense(n, n, d)
	var e, next mat.Dense
	e.CloneFrom(dm)
	for t := 1; t <= maxAge; t++ {
		out[t] = c.deltaOf(e.RawMatrix().Data)
		next.Mul(&e, dm)
		e, next = next, e
	}
	return out, nil
}

// deltaOf returns Δ from the deviation E_t = Pᵗ − Π:
//
//	P̂_t(x, y) − P̂_t(x', y) = π(y)·(E_t(y, x)/π(x) − E_t(y, x')/π(x')).
func (c *Chain) deltaOf(e []float64) float64 {
	n := c.n
	best := 0.0
	for x := 0; x < n; x++ {
		for x2 := x + 1; x2 < n; x2++ {
			s := 0.0
			for y := 0; y < n; y++ {
				s += math.Abs(c.pi[y] * (e[y*n+x]/c.pi[x] - e[y*n+x2]/c.pi[x2]))
			}
			best = math.Max(best, s/2)
		}
	}
	return math.Min(best, 1)
}

// PosteriorDelta returns Δ(t) for a chain started from the law init instead
// of π: the largest total variation between the laws of the state t steps
// earlier given two values of today's state,
//
//	post(x | z) = init(x)·Pᵗ(x, z) / Σ_u init(u)·Pᵗ(u, z),
//
// over the states z that today's state can take (Σ_u init(u)Pᵗ(u, z) > 0).
// Proposition 1's mixture argument holds with this Δ for data whose law at
// collection time is init; with init = π it is the reverse chain's Delta.
// init must be a probability vector of the chain's length (entries finite and
// ≥ 0, sum within RowSumTol of 1, rescaled to 1); t < 0 is an error.
func (c *Chain) PosteriorDelta(init []float64, t int) (float64, error) {
	mu, err := c.checkLaw("init", init)
	if err != nil {
		return 0, err
	}
	if err := checkAge("age", t); err != nil {
		return 0, err
	}
	return c.posteriorDeltaAt(mu, t), nil
}

// posteriorDeltaAt is PosteriorDelta for a validated law; at t = 0 the
// posterior is a point mass, so Δ is exactly 1 when init charges two states.
func (c *Chain) posteriorDeltaAt(mu []float64, t int) float64 {
	if t == 0 {
		k := 0
		for _, v := range mu {
			if v > 0 {
				k++
			}
		}
		if k >= 2 {
			return 1
		}
		return 0
	}
	return c.posteriorDelta(mu, c.power(t), c.deviation(t))
}

// PosteriorDeltaCurve returns PosteriorDelta(init, t) for t = 0, …, maxAge.
func (c *Chain) PosteriorDeltaCurve(init []float64, maxAge int) ([]float64, error) {
	mu, err := c.checkLaw("init", init)
	if err != nil {
		return nil, err
	}
	if err := checkAge("maxAge", maxAge); err != nil {
		return nil, err
	}
	out := make([]float64, maxAge+1)
	for t := range out {
		out[t] = c.posteriorDeltaAt(mu, t)
	}
	return out, nil
}

func (c *Chain) posteriorDelta(mu, pt, e []float64) float64 {
	n := c.n
	// nu(z) = Σ_x μ(x)Pᵗ(x, z) = π(z) + ed(z); support from the exact power.
	nu := make([]float64, n)
	ed := make([]float64, n)
	support := make([]bool, n)
	for z := 0; z < n; z++ {
		direct := 0.0
		for x := 0; x < n; x++ {
			direct += mu[x] * pt[x*n+z]
			ed[z] += mu[x] * e[x*n+z]
		}
		support[z] = direct > 0
		nu[z] = direct
	}
	// post(x|z) − μ(x) = μ(x)(E(x, z) − ed(z))/ν(z): no cancellation against 1.
	best := 0.0
	for z := 0; z < n; z++ {
		if !support[z] {
			continue
		}
		for z2 := z + 1; z2 < n; z2++ {
			if !support[z2] {
				continue
			}
			s := 0.0
			for x := 0; x < n; x++ {
				if mu[x] == 0 {
					continue
				}
				s += math.Abs(mu[x] * ((e[x*n+z]-ed[z])/nu[z] - (e[x*n+z2]-ed[z2])/nu[z2]))
			}
			best = math.Max(best, s/2)
		}
	}
	return math.Min(best, 1)
}

// checkLaw validates a probability vector over the chain's states and returns
// it rescaled to sum to 1.
func (c *Chain) checkLaw(name string, law []float64) ([]float64, error) {
	return CheckLaw(name, law, c.n)
}

// CheckLaw validates law as a probability vector of length n: finite entries
// ≥ 0 summing to 1 within RowSumTol. It returns a copy rescaled to sum to 1 or
// an error (wrapping privacy.ErrInvalidArgument) naming name and the entry.
func CheckLaw(name string, law []float64, n int) ([]float64, error) {
	if len(law) != n {
		return nil, fmt.Errorf("ageaware: %s has %d entries, want %d (one per state): %w", name, len(law), n, privacy.ErrInvalidArgument)
	}
	out := make([]float64, n)
	sum, i := normalizeLaw(out, law)
	if i >= 0 {
		return nil, fmt.Errorf("ageaware: %s[%d] = %v, want a finite probability in [0, 1]: %w", name, i, law[i], privacy.ErrInvalidArgument)
	}
	if math.Abs(sum-1) > RowSumTol {
		return nil, fmt.Errorf("ageaware: %s sums to %.12g, want 1 (within %g): %w", name, sum, RowSumTol, privacy.ErrInvalidArgument)
	}
	return out, nil
}

// normalizeLaw is the check and rescaling that NewChain applies to each row and
// CheckLaw to a law: it sums v in order and writes v/Σv into dst (len(v)),
// returning Σv and bad = −1; or, at the first entry of v that is negative, NaN
// or infinite, it returns that entry's index as bad, leaving dst unwritten. The
// caller checks Σv against 1 (and discards dst when it is off).
func normalizeLaw(dst, v []float64) (sum float64, bad int) {
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return 0, i
		}
		sum += x
	}
	for i, x := range v {
		dst[i] = x / sum
	}
	return sum, -1
}
