package pld

import (
	"fmt"
	"math"
	"sync"

	"github.com/dpsgd/dpsgd/privacy"
)

// maxGridLen bounds the number of grid points of a PMF and of a composition
// window (64 MiB of float64); a PMF that would need more returns an error
// wrapping ErrGridTooLarge, and a coarser Interval fixes it.
const maxGridLen = 1 << 23

// ErrGridTooLarge is wrapped when a PMF or a composition needs more than
// 2²³ grid points; a coarser value discretization interval avoids it.
var ErrGridTooLarge = fmt.Errorf("privacy-loss grid too large for the discretization interval: %w", privacy.ErrInvalidArgument)

// PMF is a discretized privacy-loss distribution: masses on the uniform grid of
// losses {iΔ : i ∈ ℤ} plus a mass at +∞ (Koskela et al. 2020; dp_accounting
// pld_pmf.DensePLDPmf).
//
// A pessimistic PMF's δ(ε) is an upper bound on the δ(ε) of the pair it
// was built from at every ε, an optimistic one's a lower bound. Numerical
// effects that cannot be placed on the grid exactly are tracked as two
// bounds on their effect on δ(ε) at any ε: an absolute one, ErrorBound (the
// mass outside an FFT window, FFT roundoff), and a relative one,
// RelErrorBound (roundoff of the masses themselves, a few ulps each). A
// pessimistic PMF reports raw·(1+rel) + abs, an optimistic one
// raw·(1−rel) − abs, where raw is the δ of the stored masses.
//
// A PMF is immutable and safe for concurrent use.
type PMF struct {
	interval    float64
	offset      int       // probs[i] is the mass at loss (offset+i)·interval
	probs       []float64 // finite-loss masses, trimmed of zero ends
	inf         float64   // mass at +∞
	err         float64   // absolute bound on |δ error| at any ε
	rel         float64   // relative bound on |δ error|
	pessimistic bool

	mgfOnce sync.Once // computes mgf, the logMGFs of probs for composition windows
	mgf     *mgfTable
}

// FromLosses returns the PMF with mass masses[i] at loss losses[i] plus
// infMass at +∞, on the grid of the given interval Δ > 0. A pessimistic PMF
// rounds every loss up to the grid (⌈ℓ/Δ⌉Δ: δ(ε) can only grow, as
// δ(ε) = Σ p(ℓ)(1 − e^{ε−ℓ})₊ increases in each ℓ), an optimistic one rounds
// down (⌊ℓ/Δ⌋Δ; dp_accounting's optimistic estimate). A loss of +Inf adds
// its mass to infMass, a loss of −Inf contributes nothing to δ and is
// dropped. Masses must be finite and ≥ 0 with a total (infMass included) at
// most 1 + 1e-9.
func FromLosses(losses, masses []float64, infMass, interval float64, pessimistic bool) (*PMF, error) {
	if err := checkInterval(interval); err != nil {
		return nil, fmt.Errorf("pld: FromLosses: %w", err)
	}
	if len(losses) != len(masses) {
		return nil, fmt.Errorf("pld: FromLosses: len(losses) = %d and len(masses) = %d differ: %w", len(losses), len(masses), privacy.ErrInvalidArgument)
	}
	if !(infMass >= 0 && infMass <= 1) {
		return nil, fmt.Errorf("pld: FromLosses: infMass = %g out of range [0, 1]: %w", infMass, privacy.ErrInvalidArgument)
	}
	lo, hi := math.MaxInt, math.MinInt
	idx := make([]int, len(losses))
	total := infMass
	for i, l := range losses {
		m := masses[i]
		if !(m >= 0) || math.IsInf(m, 1) {
			return nil, fmt.Errorf("pld: FromLosses: masses[%d] = %g out of range [0, +Inf): %w", i, m, privacy.ErrInvalidArgument)
		}
		total += m
		switch {
		case math.IsNaN(l):
			return nil, fmt.Errorf("pld: FromLosses: losses[%d] is NaN: %w", i, privacy.ErrInvalidArgument)
		case math.IsInf(l, 1):
			infMass += m
			idx[i] = math.MinInt
			continue
		case math.IsInf(l, -1) || m == 0:
			idx[i] = math.MinInt
			continue
		}
		r := l / interval
		if pessimistic {
			r = math.Ceil(r)
		} else {
			r = math.Floor(r)
		}
		if math.Abs(r) > 1<<50 {
			return nil, fmt.Errorf("pld: FromLosses: losses[%d]/interval = %g out of range [-2^50, 2^50]: %w", i, r, privacy.ErrInvalidArgument)
		}
		k := int(r)
		idx[i] = k
		lo, hi = min(lo, k), max(hi, k)
	}
	if total > 1+1e-9 {
		return nil, fmt.Errorf("pld: FromLosses: total mass = %g out of range [0, 1]: %w", total, privacy.ErrInvalidArgument)
	}
	p := &PMF{interval: interval, inf: math.Min(infMass, 1), pessimistic: pessimistic}
	if lo > hi {
		return p, nil
	}
	if hi-lo+1 > maxGridLen {
		return nil, fmt.Errorf("pld: FromLosses: losses span %d grid points (more than %d): %w", hi-lo+1, maxGridLen, ErrGridTooLarge)
	}
	p.offset = lo
	p.probs = make([]float64, hi-lo+1)
	for i, k := range idx {
		if k != math.MinInt {
			p.probs[k-lo] += masses[i]
		}
	}
	p.trim()
	return p, nil
}

// Identity returns the PMF of a mechanism that reveals nothing (loss 0 with
// probability 1): the neutral element of composition.
func Identity(interval float64, pessimistic bool) (*PMF, error) {
	if err := checkInterval(interval); err != nil {
		return nil, fmt.Errorf("pld: Identity: %w", err)
	}
	return &PMF{interval: interval, probs: []float64{1}, pessimistic: pessimistic}, nil
}

// checkInterval validates a discretization interval Δ in (0, +Inf).
func checkInterval(interval float64) error {
	if !(interval > 0) || math.IsInf(interval, 1) {
		return fmt.Errorf("interval = %g out of range (0, +Inf): %w", interval, privacy.ErrInvalidArgument)
	}
	return nil
}

// trim drops zero masses at both ends of the grid.
func (p *PMF) trim() {
	a, b := 0, len(p.probs)
	for a < b && p.probs[a] == 0 {
		a++
	}
	for b > a && p.probs[b-1] == 0 {
		b--
	}
	p.offset += a
	p.probs = p.probs[a:b]
	if len(p.probs) == 0 {
		p.offset = 0
	}
}

// Interval returns the grid spacing Δ of the losses.
func (p *PMF) Interval() float64 { return p.interval }

// Pessimistic reports whether δ(ε) of the PMF is an upper bound (true) or a
// lower bound (false) on that of the pair it represents.
func (p *PMF) Pessimistic() bool { return p.pessimistic }

// InfinityMass returns the mass at loss +∞.
func (p *PMF) InfinityMass() float64 { return p.inf }

// ErrorBound returns the absolute bound on the numerical error of δ(ε) (at
// any ε) that DeltaForEpsilon adds (pessimistic) or subtracts (optimistic).
func (p *PMF) ErrorBound() float64 { return p.err }

// RelErrorBound returns the relative bound on the numerical error of δ(ε).
func (p *PMF) RelErrorBound() float64 { return p.rel }

// Len returns the number of grid points between the smallest and the
// largest loss with positive mass.
func (p *PMF) Len() int { return len(p.probs) }

// Losses returns the grid losses (offset+i)·Δ and their masses, from the
// smallest loss up (copies).
func (p *PMF) Losses() (losses, masses []float64) {
	losses = make([]float64, len(p.probs))
	for i := range losses {
		losses[i] = p.loss(i)
	}
	return losses, append([]float64(nil), p.probs...)
}

// loss returns the loss of probs[i].
func (p *PMF) loss(i int) float64 { return float64(p.offset+i) * p.interval }

// Mass returns the total mass, finite losses and +∞ together (1 up to
// rounding and truncation).
func (p *PMF) Mass() float64 {
	s := p.inf
	for _, v := range p.probs {
		s += v
	}
	return s
}

// rawDelta returns Σ_{ℓ>ε} p(ℓ)(1 − e^{ε−ℓ}) + p(∞), without error bounds.
func (p *PMF) rawDelta(eps float64) float64 {
	if math.IsInf(eps, 1) {
		return p.inf
	}
	// First index with loss > eps.
	start := 0
	if k := math.Floor(eps/p.interval) + 1 - float64(p.offset); k > 0 {
		if k >= float64(len(p.probs)) {
			return p.inf
		}
		start = int(k)
	}
	for start > 0 && p.loss(start-1) > eps {
		start--
	}
	for start < len(p.probs) && p.loss(start) <= eps {
		start++
	}
	var s, c float64 // Kahan–Babuška summation
	for i := start; i < len(p.probs); i++ {
		v := p.probs[i] * -math.Expm1(eps-p.loss(i))
		t := s + v
		if math.Abs(s) >= math.Abs(v) {
			c += (s - t) + v
		} else {
			c += (v - t) + s
		}
		s = t
	}
	return s + c + p.inf
}

// DeltaForEpsilon returns the hockey-stick divergence
//
//	δ(ε) = Σ_ℓ p(ℓ)(1 − e^{ε−ℓ})₊ + p(∞)
//
// (each term as −expm1(ε−ℓ), no cancellation), with
// the error bounds added for a pessimistic PMF (capped at 1) or subtracted
// for an optimistic one (floored at 0). ε may be any real number or +Inf,
// not NaN.
func (p *PMF) DeltaForEpsilon(eps float64) (float64, error) {
	if math.IsNaN(eps) || math.IsInf(eps, -1) {
		return 0, fmt.Errorf("pld: DeltaForEpsilon: eps = %g out of range (-Inf, +Inf]: %w", eps, privacy.ErrInvalidArgument)
	}
	return p.delta(eps), nil
}

// delta is DeltaForEpsilon for valid input.
func (p *PMF) delta(eps float64) float64 {
	d := p.rawDelta(eps)
	if p.pessimistic {
		return math.Min(1, d*(1+p.rel)+p.err)
	}
	return math.Max(0, d*(1-p.rel)-p.err)
}

// EpsilonForDelta returns the smallest ε ≥ 0 with DeltaForEpsilon(ε) ≤ delta,
// for delta in (0, 1). Between two grid losses δ(ε) = S_p − e^ε S_q with S_p
// and S_q the P- and Q-masses above ε, so the crossing is solved exactly
// (ε = ln((S_p − δ)/S_q), as dp_accounting does) and then moved up by
// doubling steps from one ulp until δ(ε) ≤ delta holds in floating point. A delta at or below the mass at
// +∞ (plus the error bound) is reached by no ε: the error wraps
// privacy.ErrUnreachable.
func (p *PMF) EpsilonForDelta(delta float64) (float64, error) {
	if !(delta > 0 && delta < 1) {
		return 0, fmt.Errorf("pld: EpsilonForDelta: delta = %g out of range (0, 1): %w", delta, privacy.ErrInvalidArgument)
	}
	t := (delta + p.err) / (1 - p.rel) // target for the raw δ
	if p.pessimistic {
		t = (delta - p.err) / (1 + p.rel)
	}
	if !(t > p.inf) {
		return 0, fmt.Errorf("pld: EpsilonForDelta: delta = %g is not above the mass at infinity %g plus the error bounds (%g absolute, %g relative): %w",
			delta, p.inf, p.err, p.rel, privacy.ErrUnreachable)
	}
	// Scan down from the top. sp is the P-mass of the losses above the
	// current point, sq·e^{−shift} their Q-mass Σ p e^{−ℓ} (scaled so that
	// it neither under- nor overflows; c = e^{shift−ℓ_j}).
	sp, sq := p.inf, 0.0
	j := len(p.probs) - 1
	var shift, c float64
	if j >= 0 {
		shift, c = p.loss(j), 1
	}
	crossed := false
	for ; j >= 0 && p.loss(j) > 0; j-- {
		l := p.loss(j)
		c = math.Exp(shift - l)
		if c > 1e200 { // rescale: shift down to the current loss
			sq /= c
			shift, c = l, 1
		}
		// δ(ℓ_j) = sp − e^{ℓ_j}·Q-mass = sp − sq·e^{ℓ_j−shift} = sp − sq/c.
		if sp-sq/c > t {
			crossed = true // the crossing is in (ℓ_j, ℓ_{j+1}]
			break
		}
		sp += p.probs[j]
		sq += p.probs[j] * c
	}
	lower := 0.0
	if crossed {
		lower = p.loss(j)
	} else if sp-sq*math.Exp(-shift) <= t {
		return 0, nil // δ(0) ≤ t
	}
	// On the segment, S_p − e^ε S_q = t with S_q = sq·e^{−shift}.
	eps := math.Max(lower, math.Log(sp-t)-math.Log(sq)+shift)
	for step := math.Max(0x1p-52*eps, 1e-300); p.rawDelta(eps) > t; step *= 2 {
		eps += step
	}
	return eps, nil
}

// compatible checks that two PMFs can be composed.
func (p *PMF) compatible(o *PMF) error {
	if o == nil {
		return fmt.Errorf("pld: Compose: other PMF is nil: %w", privacy.ErrInvalidArgument)
	}
	if math.Abs(p.interval-o.interval) > 1e-12*p.interval {
		return fmt.Errorf("pld: Compose: intervals %g and %g differ: %w", p.interval, o.interval, privacy.ErrInvalidArgument)
	}
	if p.pessimistic != o.pessimistic {
		return fmt.Errorf("pld: Compose: a pessimistic and an optimistic PMF cannot be composed: %w", privacy.ErrInvalidArgument)
	}
	return nil
}

// Compose returns the PMF of the composition of the two mechanisms (the
// convolution of their loss distributions; privacy losses of independent
// mechanisms add), computed by FFT over a window of losses outside of which
// the Chernoff bound leaves at most 1e-18 of mass (that mass and a roundoff
// allowance go to ErrorBound). Both PMFs must share the interval and the
// rounding direction.
func (p *PMF) Compose(o *PMF) (*PMF, error) {
	if err := p.compatible(o); err != nil {
		return nil, err
	}
	return convolve(p, o, 1)
}

// SelfCompose returns the PMF of n ≥ 0 independent runs of the mechanism:
// the n-fold convolution, as one FFT, a pointwise n-th power and one
// inverse FFT (dp_accounting common.self_convolve), over the Chernoff window
// of Compose. SelfCompose(0) is the identity and SelfCompose(1) the PMF
// itself.
func (p *PMF) SelfCompose(n int) (*PMF, error) {
	switch {
	case n < 0:
		return nil, fmt.Errorf("pld: SelfCompose: n = %d out of range [0, +Inf): %w", n, privacy.ErrInvalidArgument)
	case n == 0:
		return Identity(p.interval, p.pessimistic)
	case n == 1:
		return p, nil
	}
	return convolve(p, nil, n)
}
