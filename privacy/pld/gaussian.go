package pld

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/privacy"
	"gonum.org/v1/gonum/mathext"
	"gonum.org/v1/gonum/stat/distuv"
)

// Direction selects which of the two neighbouring datasets plays P in the
// pair (P, Q) of add/remove-one adjacency.
type Direction int

const (
	// Remove: P is the run on the dataset with the record, Q without it.
	// For the Poisson-subsampled Gaussian P = (1−q)N(0, σ²) + qN(1, σ²) and
	// Q = N(0, σ²).
	Remove Direction = iota
	// Add: P is the run without the record, Q with it: P = N(0, σ²) and
	// Q = (1−q)N(0, σ²) + qN(1, σ²).
	Add
)

// String returns "remove" or "add".
func (d Direction) String() string {
	switch d {
	case Remove:
		return "remove"
	case Add:
		return "add"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// DefaultInterval is the default loss grid spacing Δ (dp_accounting's
// default value_discretization_interval).
const DefaultInterval = 1e-4

// DefaultTailMass is the default bound on the mass of P outside the range
// of outputs x that PoissonGaussian discretizes; the mass above goes to +∞,
// the mass below to the lowest grid loss, so truncation is pessimistic.
const DefaultTailMass = 1e-20

// Options are the discretization settings of PoissonGaussian and of the
// Poisson accountant; zero fields select the defaults.
type Options struct {
	// Interval is the loss grid spacing Δ, in (0, 1]; default
	// DefaultInterval. A coarser grid is faster and more pessimistic.
	Interval float64
	// TailMass bounds the truncated mass of one step, in (0, 1e-3];
	// default DefaultTailMass.
	TailMass float64
}

// withDefaults validates o and fills the defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.TailMass == 0 {
		o.TailMass = DefaultTailMass
	}
	if !(o.Interval > 0 && o.Interval <= 1) {
		return o, fmt.Errorf("Interval = %g out of range (0, 1]: %w", o.Interval, privacy.ErrInvalidArgument)
	}
	if !(o.TailMass > 0 && o.TailMass <= 1e-3) {
		return o, fmt.Errorf("TailMass = %g out of range (0, 1e-3]: %w", o.TailMass, privacy.ErrInvalidArgument)
	}
	return o, nil
}

// checkQSigma validates q in (0, 1] and σ in (0, +Inf).
func checkQSigma(q, sigma float64) error {
	if !(q > 0 && q <= 1) {
		return fmt.Errorf("q = %g out of range (0, 1]: %w", q, privacy.ErrInvalidArgument)
	}
	if !(sigma > 0) || math.IsInf(sigma, 1) {
		return fmt.Errorf("sigma = %g out of range (0, +Inf): %w", sigma, privacy.ErrInvalidArgument)
	}
	return nil
}

// poissonGaussian describes one step of the Poisson-subsampled Gaussian
// mechanism of sensitivity 1 and noise σ, in one direction.
type poissonGaussian struct {
	q, sigma float64
	dir      Direction
	log1mq   float64 // ln(1−q), −Inf for q = 1
	logq     float64
}

func newPoissonGaussian(q, sigma float64, dir Direction) *poissonGaussian {
	return &poissonGaussian{q: q, sigma: sigma, dir: dir, log1mq: math.Log1p(-q), logq: math.Log(q)}
}

// lossRange returns the range of losses discretized: those of the outputs
// x in [−σz, 1+σz], which carry all but tail of P (each of the four
// component tails ≤ tail/4).
func (g *poissonGaussian) lossRange(tail float64) (lmin, lmax float64) {
	z := -mathext.NormalQuantile(tail / 4)
	lmin, lmax = g.lossRemove(-g.sigma*z), g.lossRemove(1+g.sigma*z)
	if g.dir == Add {
		lmin, lmax = -lmax, -lmin
	}
	return lmin, lmax
}

// lossRemove returns the remove-direction privacy loss at output x,
//
//	ℓ(x) = ln(1 − q + q·e^{(2x−1)/(2σ²)})   (Mironov, Talwar & Zhang 2019),
//
// increasing in x; the add-direction loss is −ℓ(x). The exponent is formed
// as ((x − 1/2)/σ)/σ, since σ² overflows for σ ≳ 1e154.
func (g *poissonGaussian) lossRemove(x float64) float64 {
	u := (x - 0.5) / g.sigma / g.sigma
	return numeric.LogAddExp(g.log1mq, g.logq+u)
}

// zRemove is the inverse of lossRemove in standardized form: the x with
// ℓ(x) = l, as z0 = x/σ and z1 = (x−1)/σ (−Inf for l ≤ ln(1−q)). With
// s = ln((e^l − 1 + q)/q), x = σ²s + 1/2; where σ²s overflows (σ ≳ 1e154),
// z0 = σs + 1/(2σ) and z1 = σs − 1/(2σ) instead. The edge at l = 0 is
// exact (s = 0, x = 1/2) for any σ. s is ln(e^l − (1−q)) − ln q (exact for
// q = 1), except for q < 1 and |s| < 1, where that difference would lose the
// digits of s below an ulp of ln q (all of them at l = 0), which σ then
// multiplies: there s = log1p(expm1(l)/q), whose argument is in (−0.64, 1.8).
func (g *poissonGaussian) zRemove(l float64) (z0, z1 float64) {
	s := math.Inf(-1)
	if d := numeric.LogSubExp(l, g.log1mq); !math.IsInf(d, -1) {
		s = d - g.logq
	}
	if g.q < 1 && math.Abs(s) < 1 {
		s = math.Log1p(math.Expm1(l) / g.q)
	}
	if x := g.sigma*g.sigma*s + 0.5; !math.IsInf(x, 0) && !math.IsNaN(x) {
		return x / g.sigma, (x - 1) / g.sigma
	}
	h := 0.5 / g.sigma
	return g.sigma*s + h, g.sigma*s - h
}

// Nodes and weights of 8-point Gauss–Legendre quadrature on [−1, 1].
var glNodes = [4]float64{0.1834346424956498, 0.5255324099163290, 0.7966664774136267, 0.9602898564975363}
var glWeights = [4]float64{0.3626837833783620, 0.3137066458778873, 0.2223810344533745, 0.1012285362903763}

// between returns Φ(zb) − Φ(za) for za ≤ zb with a relative error of a few
// ulps: by 8-point Gauss–Legendre quadrature of the density when the
// interval is narrow (width·max(1, |z|) ≤ 1/2, where the density varies by
// at most e^{1/2} and the quadrature error is far below rounding), else as
// the difference of the CDFs in the thinner tail (then at least 1 − e^{−1/2}
// of the larger term survives, so no digits are lost). Φ (and Φ̄ = 1 − Φ,
// as numeric.NormSF) is evaluated only on that second path, which few cells
// of a fine grid take: ±Inf give 0 and 1 exactly.
func between(za, zb float64) float64 {
	if w := zb - za; w*math.Max(1, math.Max(math.Abs(za), math.Abs(zb))) <= 0.5 {
		h, m := 0.5*w, 0.5*(za+zb)
		var s float64
		for i, x := range glNodes {
			u, v := m-h*x, m+h*x
			s += glWeights[i] * (math.Exp(-0.5*u*u) + math.Exp(-0.5*v*v))
		}
		return h * s / math.Sqrt(2*math.Pi)
	}
	switch {
	case za >= 0:
		return math.Max(0, numeric.NormSF(za)-numeric.NormSF(zb))
	case zb <= 0:
		return math.Max(0, distuv.UnitNormal.CDF(zb)-distuv.UnitNormal.CDF(za))
	}
	return math.Max(0, 1-distuv.UnitNormal.CDF(za)-numeric.NormSF(zb))
}

// PoissonGaussian returns the pessimistic PMF of one step of the
// Poisson-subsampled Gaussian mechanism (sampling rate q in (0, 1], noise
// multiplier σ > 0, sensitivity 1) in
// direction dir, by connect-the-dots (Doroshenko et al. 2022, Alg. 1 in its
// cell form): the outputs x whose loss falls between two grid losses ℓ_i <
// ℓ_{i+1} form a cell whose P-mass p and Q-mass r (Gaussian CDF
// differences, exact) are split between the two ends as
//
//	p_{i+1} = (p − e^{ℓ_i} r)/(1 − e^{−Δ}),   p_i = p − p_{i+1},
//
// which keeps both P(cell) and Q(cell) = E_P[e^{−L}; cell]. The δ(ε) of the
// result interpolates the true convex δ(e^ε) linearly between grid points
// (it is exact at every grid loss), so it is never below the true δ. The
// P-mass of outputs beyond the truncation range (at most o.TailMass) goes to
// +∞ (high losses) or to the lowest grid loss (low losses): pessimistic.
func PoissonGaussian(q, sigma float64, dir Direction, o Options) (*PMF, error) {
	if err := checkQSigma(q, sigma); err != nil {
		return nil, fmt.Errorf("pld: PoissonGaussian: %w", err)
	}
	if dir != Remove && dir != Add {
		return nil, fmt.Errorf("pld: PoissonGaussian: dir = %d, want Remove (0) or Add (1): %w", int(dir), privacy.ErrInvalidArgument)
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("pld: PoissonGaussian: %w", err)
	}
	var want [2]bool
	want[dir] = true
	pair, err := poissonGaussianPair(q, sigma, o, want)
	if err != nil {
		return nil, err
	}
	return pair[dir], nil
}

// poissonGaussianPair is PoissonGaussian for valid q, σ and o (defaults
// filled), in the directions want selects (indexed by Direction), with the
// work both share done once. The add direction's grid is the negated remove
// grid (the loss range is negated exactly, and ⌊−x⌋ = −⌈x⌉), so its edge
// i is the remove direction's edge n−1−i, at the same output x, and its
// cell i the remove direction's cell n−2−i: the cells' component masses
// are computed once, and each direction weighs and splits
// them as PoissonGaussian alone does, giving the same PMFs bit for bit.
func poissonGaussianPair(q, sigma float64, o Options, want [2]bool) ([2]*PMF, error) {
	return poissonGaussianPairOn(q, sigma, o, want, runtime.GOMAXPROCS(0))
}

// minCellsPerWorker is the fewest cells poissonGaussianPairOn gives one
// goroutine.
const minCellsPerWorker = 4096

// poissonGaussianPairOn is poissonGaussianPair with the cells spread over up
// to workers goroutines; the result does not depend on workers.
func poissonGaussianPairOn(q, sigma float64, o Options, want [2]bool, workers int) ([2]*PMF, error) {
	var out [2]*PMF
	g := newPoissonGaussian(q, sigma, Remove)
	delta := o.Interval
	lmin, lmax := g.lossRange(o.TailMass)
	// The loss is 0 at x = 1/2, inside the range; the grid always holds
	// −Δ, 0 and Δ, so that a range narrower than Δ (a large σ, where the
	// loss is nearly a point mass at 0) still has the cells on both sides of
	// loss 0 rather than one edge with half of P above it sent to +∞.
	ilo, ihi := math.Min(math.Floor(lmin/delta), -1), math.Max(math.Ceil(lmax/delta), 1)
	if ihi-ilo+1 > maxGridLen {
		return out, fmt.Errorf("pld: PoissonGaussian: q = %g, sigma = %g needs %g grid points at Interval = %g (more than %d): %w",
			q, sigma, ihi-ilo+1, delta, maxGridLen, ErrGridTooLarge)
	}
	// Remove-direction grid: losses (lo+i)Δ, i < n; the add direction's is
	// (−lo−n+1+i)Δ = −(lo+n−1−i)Δ.
	lo, n := int(ilo), int(ihi-ilo)+1
	loAdd := -(lo + n - 1)

	// edgeAt returns the boundary output x at remove loss (lo+i)Δ,
	// standardized for the two mixture components (means 0 and 1).
	type edge struct{ z0, z1 float64 }
	edgeAt := func(i int) edge {
		var e edge
		e.z0, e.z1 = g.zRemove(float64(lo+i) * delta)
		return e
	}
	// comps returns the masses of the two components on the x-interval
	// between edges a and b (a the left one).
	comps := func(a, b edge) (m0, m1 float64) {
		return between(a.z0, b.z0), between(a.z1, b.z1)
	}
	minusInf := edge{z0: math.Inf(-1), z1: math.Inf(-1)}
	plusInf := edge{z0: math.Inf(1), z1: math.Inf(1)}

	// P and Q of a set of outputs from its component masses: remove P =
	// mixture, Q = N(0); add P = N(0), Q = mixture.
	remP := func(m0, m1 float64) float64 { return (1-q)*m0 + q*m1 }
	remQ := func(m0, m1 float64) float64 { return 1.0*m0 + 0.0*m1 }
	addP := func(m0, m1 float64) float64 { return 1.0*m0 + 0.0*m1 }
	addQ := func(m0, m1 float64) float64 { return (1-q)*m0 + q*m1 }

	var rem, add []float64
	var remInf, addInf float64
	below0, below1 := comps(minusInf, edgeAt(0))  // remove: lowest loss; add: +∞
	above0, above1 := comps(edgeAt(n-1), plusInf) // remove: +∞; add: lowest loss
	if want[Remove] {
		rem = make([]float64, n)
		rem[0], remInf = remP(below0, below1), remP(above0, above1)
	}
	if want[Add] {
		add = make([]float64, n)
		add[0], addInf = addP(above0, above1), addP(below0, below1)
	}
	// The cells are split in chunks of consecutive cells [a, b), on up to
	// workers goroutines. Cell i (of the remove direction; the add
	// direction's cell j = n−2−i) gives a low part to grid point i (j) and a
	// high part to i+1 (j+1), as splitCell does. A chunk writes the points
	// whose low part is its own and hands back the high part that lands on
	// another chunk's point (remove: of its last cell, to point b; add: of
	// its first cell, to point n−1−a), added after all chunks are done. Every
	// point thus sums the same one or two parts as the sequential loop of
	// PoissonGaussian in its time, starting from 0 (or the tail mass at point
	// 0), only the two parts of a chunk's boundary point possibly in the
	// other order, which floating-point addition does not see (a + b = b + a,
	// and no part is −0): the PMFs are the same bit for bit for any workers.
	type carry struct {
		rem, add       float64
		hasRem, hasAdd bool
	}
	oneMinusEmD := -math.Expm1(-delta)
	cells := func(a, b int) (c carry) {
		left := edgeAt(a)
		for i := a; i < b; i++ {
			right := edgeAt(i + 1)
			m0, m1 := comps(left, right)
			left = right
			if rem != nil { // loss increases with x: cell i
				if low, high, ok := splitParts(remP(m0, m1), remQ(m0, m1), float64(lo+i)*delta, oneMinusEmD); ok {
					if i+1 < b {
						rem[i+1] += high
					} else {
						c.rem, c.hasRem = high, true
					}
					rem[i] += low
				}
			}
			if add != nil { // loss decreases with x: cell n−2−i
				j := n - 2 - i
				if low, high, ok := splitParts(addP(m0, m1), addQ(m0, m1), float64(loAdd+j)*delta, oneMinusEmD); ok {
					if i > a {
						add[j+1] += high
					} else {
						c.add, c.hasAdd = high, true
					}
					add[j] += low
				}
			}
		}
		return c
	}
	chunks := max(1, min(workers, (n-1)/minCellsPerWorker))
	bounds := make([]int, chunks+1)
	for k := range bounds {
		bounds[k] = k * (n - 1) / chunks
	}
	carries := make([]carry, chunks)
	if chunks == 1 {
		carries[0] = cells(0, n-1)
	} else {
		var wg sync.WaitGroup
		for k := range chunks {
			wg.Go(func() { carries[k] = cells(bounds[k], bounds[k+1]) })
		}
		wg.Wait()
	}
	for k, c := range carries {
		if c.hasRem {
			rem[bounds[k+1]] += c.rem
		}
		if c.hasAdd {
			add[n-1-bounds[k]] += c.add
		}
	}
	for d, probs := range [2][]float64{rem, add} {
		if probs == nil {
			continue
		}
		p := &PMF{interval: delta, offset: lo, probs: probs, inf: remInf, pessimistic: true}
		if d == int(Add) {
			p.offset, p.inf = loAdd, addInf
		}
		// Roundoff allowance: every cell mass is computed to a few ulps
		// (between), so δ, a positive combination of them, is within a
		// relative 64 ulps; the split's cancellation moves at most a few ulps
		// of a cell's mass by one grid step, which changes δ by far less.
		p.rel = 64 * 0x1p-52
		p.trim()
		out[d] = p
	}
	return out, nil
}

// splitParts splits the cell (ℓ_i, ℓ_i+Δ] of P-mass p and Q-mass r between
// grid points i (low) and i+1 (high) by connect-the-dots; ok is false for
// an empty cell (p = 0), which adds nothing.
func splitParts(p, r, li, oneMinusEmD float64) (low, high float64, ok bool) {
	if p == 0 {
		return 0, 0, false
	}
	hi := (p - math.Exp(li+math.Log(r))) / oneMinusEmD
	hi = math.Min(math.Max(hi, 0), p)
	return p - hi, hi, true
}
