package shuffle

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/pld"
	"gonum.org/v1/gonum/mathext"
)

const (
	// Means of the two mixtures: the pair is P = MoG(meanUpper) (the record
	// present) and Q = MoG(meanLower) (its zero-out ghost) (Chua et al.
	// 2024; dpsgd_bounds.py ShuffleAccountant).
	meanUpper = 2.0
	meanLower = 1.0
	// capTail bounds the mass of max_t x_t outside [cLo, cHi] under both
	// mixtures.
	capTail = 1e-30
	// gridCaps is the number of thresholds C of the coarse search.
	gridCaps = 4000
	// goldenIters refines the best threshold by golden-section search.
	goldenIters = 48
	// sliceLoss is the width of a slice of the max statistic in units of
	// the privacy loss it spans at large C (gap = sliceLoss·σ²; Chua et al.
	// use the discretization interval, 1e-3).
	sliceLoss = 1e-3
	// maxSlices caps the number of slices (a coarser slicing is still a
	// lower bound: it is a post-processing of the statistic).
	maxSlices = 1 << 17
	// lossInterval is the loss grid of the multi-epoch PLD, coarsened when
	// the single-epoch PLD would exceed maxSingleLen grid points.
	lossInterval = 1e-4
	maxSingleLen = 1 << 18
	// cacheSize is the number of composed multi-epoch PLDs kept.
	cacheSize = 8
)

// LowerBound is Chua et al.'s lower bound on the privacy of DP-SGD with
// fixed-size shuffling, under zero-out adjacency: a
// linear loss with every other record at −1, the target at +1 and its ghost
// at 0 makes the M noisy sums of an epoch (σ-scaled, shifted by the batch
// size) the mixtures
//
//	P = MoG(2), Q = MoG(1),  MoG(m) = (1/M) Σ_t N(m·e_t, σ² I_M),
//
// so the true δ(ε) of a run is at least that of any test on this pair.
//
// One epoch: the tests "max_t x_t > C" (for H_ε(P‖Q)) and "max_t x_t ≤ C"
// (for H_ε(Q‖P)), with P(max ≤ C) = Φ((C−m)/σ)Φ(C/σ)^{M−1} for MoG(m):
//
//	δ(ε) ≥ max_C max{P(max > C) − e^ε Q(max > C), Q(max ≤ C) − e^ε P(max ≤ C)},
//
// evaluated in log space and maximized over C by a grid of 4000 thresholds
// and golden-section refinement (any C gives a valid bound, so an inexact
// maximum only weakens it).
//
// E epochs, each with a fresh permutation: the max statistic of every epoch
// is sliced (slices 1e-3·σ² wide, tails as two atoms) and its privacy-loss
// distribution, rounded DOWN to the loss grid (optimistic: a lower bound),
// is composed E times with package pld; δ_E(ε) is the larger of that and the
// one-epoch bound (E epochs reveal at least what one does).
//
// The numbers are "at least" values: LowerBound() returns true and
// privacy.Budget.Check refuses this accountant. A LowerBound is safe for
// concurrent use.
type LowerBound struct {
	sigma  float64
	rounds int

	cube *cube

	mu     sync.Mutex
	single *[2]*pld.PMF             // one epoch: H(P‖Q), H(Q‖P)
	cache  *pld.Cache[*[2]*pld.PMF] // composed per epochs
}

var (
	_ privacy.Accountant = (*LowerBound)(nil)
	_ privacy.LowerBound = (*LowerBound)(nil)
)

// NewLowerBound returns the shuffle lower bound for noise multiplier σ > 0
// and rounds = M ≥ 1 steps per epoch.
func NewLowerBound(sigma float64, rounds int) (*LowerBound, error) {
	if !(sigma > 0) || math.IsInf(sigma, 1) {
		return nil, fmt.Errorf("shuffle: NewLowerBound: sigma = %g out of range (0, +Inf): %w", sigma, privacy.ErrInvalidArgument)
	}
	if rounds < 1 {
		return nil, fmt.Errorf("shuffle: NewLowerBound: rounds = %d out of range [1, +Inf): %w", rounds, privacy.ErrInvalidArgument)
	}
	return &LowerBound{
		sigma: sigma, rounds: rounds,
		cube:  newCube(sigma, rounds),
		cache: pld.NewCache[*[2]*pld.PMF](cacheSize),
	}, nil
}

// Name returns "lower".
func (l *LowerBound) Name() string { return "lower" }

// Sampler returns privacy.SamplerShuffle.
func (l *LowerBound) Sampler() string { return privacy.SamplerShuffle }

// Adjacency returns privacy.AdjacencyZeroOut.
func (l *LowerBound) Adjacency() string { return privacy.AdjacencyZeroOut }

// LowerBound returns true: the numbers are lower bounds on the true ε and δ.
func (l *LowerBound) LowerBound() bool { return true }

// Sigma returns the noise multiplier σ.
func (l *LowerBound) Sigma() float64 { return l.sigma }

// Rounds returns M, the steps per epoch.
func (l *LowerBound) Rounds() int { return l.rounds }

// Epochs returns E = ⌈steps / M⌉ (a partial epoch counts as a whole one).
func (l *LowerBound) Epochs(steps int) int { return privacy.EpochsOf(steps, l.rounds) }

// Delta returns a lower bound on δ(eps) after steps steps (eps ≥ 0, +Inf
// gives 0).
func (l *LowerBound) Delta(steps int, eps float64) (float64, error) {
	if steps < 0 {
		return 0, fmt.Errorf("shuffle: Delta: steps = %d out of range [0, +Inf): %w", steps, privacy.ErrInvalidArgument)
	}
	return l.EpochDelta(l.Epochs(steps), eps)
}

// Epsilon returns a lower bound on ε at delta after steps steps: the
// smallest ε with the lower-bound δ(ε) ≤ delta, rounded down (the true ε is
// at least this).
func (l *LowerBound) Epsilon(steps int, delta float64) (float64, error) {
	if steps < 0 {
		return 0, fmt.Errorf("shuffle: Epsilon: steps = %d out of range [0, +Inf): %w", steps, privacy.ErrInvalidArgument)
	}
	return l.EpochEpsilon(l.Epochs(steps), delta)
}

// SingleEpochDelta returns the one-epoch cube bound
// max_C max{P(max > C) − e^ε Q(max > C), Q(max ≤ C) − e^ε P(max ≤ C)}
// and the threshold C that attains it (eps ≥ 0). At eps = 0 it is a lower
// bound on the total variation distance of the pair.
func (l *LowerBound) SingleEpochDelta(eps float64) (delta, threshold float64, err error) {
	if !(eps >= 0) {
		return 0, 0, fmt.Errorf("shuffle: SingleEpochDelta: eps = %g out of range [0, +Inf]: %w", eps, privacy.ErrInvalidArgument)
	}
	ld, c := l.cube.logDelta(eps)
	return math.Exp(ld), c, nil
}

// EpochDelta returns the lower bound on δ(eps) after epochs ≥ 0 epochs.
func (l *LowerBound) EpochDelta(epochs int, eps float64) (float64, error) {
	if epochs < 0 {
		return 0, fmt.Errorf("shuffle: EpochDelta: epochs = %d out of range [0, +Inf): %w", epochs, privacy.ErrInvalidArgument)
	}
	if !(eps >= 0) {
		return 0, fmt.Errorf("shuffle: EpochDelta: eps = %g out of range [0, +Inf]: %w", eps, privacy.ErrInvalidArgument)
	}
	if epochs == 0 || math.IsInf(eps, 1) {
		return 0, nil
	}
	ld, _ := l.cube.logDelta(eps)
	d := math.Exp(ld)
	if epochs == 1 {
		return d, nil
	}
	c, err := l.composed(epochs)
	if err != nil {
		return 0, err
	}
	for _, p := range c {
		v, err := p.DeltaForEpsilon(eps)
		if err != nil {
			return 0, err
		}
		d = math.Max(d, v)
	}
	return d, nil
}

// EpochEpsilon returns the lower bound on ε at delta in (0, 1) after
// epochs ≥ 0 epochs.
func (l *LowerBound) EpochEpsilon(epochs int, delta float64) (float64, error) {
	if epochs < 0 {
		return 0, fmt.Errorf("shuffle: EpochEpsilon: epochs = %d out of range [0, +Inf): %w", epochs, privacy.ErrInvalidArgument)
	}
	if !(delta > 0 && delta < 1) {
		return 0, fmt.Errorf("shuffle: EpochEpsilon: delta = %g out of range (0, 1): %w", delta, privacy.ErrInvalidArgument)
	}
	if epochs == 0 {
		return 0, nil
	}
	eps := l.cube.epsilon(delta, l.sigma)
	if epochs == 1 {
		return eps, nil
	}
	c, err := l.composed(epochs)
	if err != nil {
		return 0, err
	}
	for _, p := range c {
		e, err := p.EpsilonForDelta(delta)
		if errors.Is(err, privacy.ErrUnreachable) {
			continue // this direction gives no finite bound; the others stand
		}
		if err != nil {
			return 0, err
		}
		// EpsilonForDelta solves the crossing exactly and then rounds up
		// by ulps (the side that is conservative for a guarantee); undo
		// that margin for a lower bound.
		eps = math.Max(eps, e*(1-1e-12))
	}
	return eps, nil
}

// composed returns the E-fold composition of the one-epoch optimistic PLDs
// (both directions), cached.
func (l *LowerBound) composed(epochs int) (*[2]*pld.PMF, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.cache.Get(epochs); ok {
		return c, nil
	}
	if l.single == nil {
		s, err := l.cube.singleEpochPLDs()
		if err != nil {
			return nil, err
		}
		l.single = s
	}
	var c [2]*pld.PMF
	for i, p := range l.single {
		for {
			r, err := p.SelfCompose(epochs)
			if errors.Is(err, pld.ErrGridTooLarge) && p.Interval() < 1 {
				// Coarser rounding down is still a lower bound.
				if p, err = coarsen(p, 2*p.Interval()); err != nil {
					return nil, err
				}
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("shuffle: sigma = %g, rounds = %d, epochs = %d: %w", l.sigma, l.rounds, epochs, err)
			}
			c[i] = r
			break
		}
	}
	l.cache.Put(epochs, &c)
	return &c, nil
}

// coarsen re-rounds an optimistic PMF down to a coarser grid.
func coarsen(p *pld.PMF, interval float64) (*pld.PMF, error) {
	losses, masses := p.Losses()
	return pld.FromLosses(losses, masses, p.InfinityMass(), interval, false)
}

// cube evaluates the one-epoch tests on the max statistic.
type cube struct {
	sigma    float64
	t        float64 // M, steps per epoch
	cLo, cHi float64
	caps     []float64
	// ln of P(max > C), Q(max > C), Q(max ≤ C), P(max ≤ C) on caps.
	lOutP, lOutQ, lInQ, lInP []float64
}

// logIn returns ln P(max_t x_t ≤ c) under MoG(m):
// ln Φ((c−m)/σ) + (M−1) ln Φ(c/σ).
func (k *cube) logIn(c, m float64) float64 {
	return numeric.LogNormCDF((c-m)/k.sigma) + (k.t-1)*numeric.LogNormCDF(c/k.sigma)
}

// logOut returns ln P(max_t x_t > c) = ln(1 − e^{logIn}) under MoG(m).
func (k *cube) logOut(c, m float64) float64 {
	return math.Log(-math.Expm1(k.logIn(c, m)))
}

func newCube(sigma float64, rounds int) *cube {
	k := &cube{sigma: sigma, t: float64(rounds)}
	// Below cLo both mixtures put at most capTail (P(max ≤ C) ≤ Φ(C/σ)^M),
	// above cHi at most capTail (P(max > C) ≤ 1 − Φ((C−2)/σ)^M).
	k.cLo = sigma * quantileOfPow(math.Log(capTail)/k.t)
	k.cHi = meanUpper - sigma*mathext.NormalQuantile(-math.Expm1(math.Log1p(-capTail)/k.t))
	k.caps = make([]float64, gridCaps)
	k.lOutP = make([]float64, gridCaps)
	k.lOutQ = make([]float64, gridCaps)
	k.lInQ = make([]float64, gridCaps)
	k.lInP = make([]float64, gridCaps)
	h := (k.cHi - k.cLo) / (gridCaps - 1)
	for i := range k.caps {
		c := k.cLo + float64(i)*h
		k.caps[i] = c
		inP, inQ := k.logIn(c, meanUpper), k.logIn(c, meanLower)
		k.lInP[i], k.lInQ[i] = inP, inQ
		k.lOutP[i], k.lOutQ[i] = math.Log(-math.Expm1(inP)), math.Log(-math.Expm1(inQ))
	}
	return k
}

// quantileOfPow returns Φ⁻¹(e^{lp}) for lp ≤ 0, accurate near both ends.
func quantileOfPow(lp float64) float64 {
	if p := math.Exp(lp); p < 0.5 {
		return mathext.NormalQuantile(p)
	}
	return -mathext.NormalQuantile(-math.Expm1(lp))
}

// logH returns ln of the test's hockey-stick value at threshold c: dir 0 is
// P(max > c) − e^ε Q(max > c), dir 1 is Q(max ≤ c) − e^ε P(max ≤ c); −Inf
// where it is ≤ 0.
func (k *cube) logH(eps, c float64, dir int) float64 {
	if dir == 0 {
		return numeric.LogSubExp(k.logOut(c, meanUpper), eps+k.logOut(c, meanLower))
	}
	return numeric.LogSubExp(k.logIn(c, meanLower), eps+k.logIn(c, meanUpper))
}

// logDelta returns ln of the one-epoch cube bound at eps and its threshold.
func (k *cube) logDelta(eps float64) (float64, float64) {
	best, bestC := math.Inf(-1), math.NaN()
	for dir := 0; dir < 2; dir++ {
		bi, bv := -1, math.Inf(-1)
		for i := range k.caps {
			var v float64
			if dir == 0 {
				v = numeric.LogSubExp(k.lOutP[i], eps+k.lOutQ[i])
			} else {
				v = numeric.LogSubExp(k.lInQ[i], eps+k.lInP[i])
			}
			if v > bv {
				bi, bv = i, v
			}
		}
		if bi < 0 {
			continue
		}
		// Golden-section refinement in the neighbouring grid cells.
		a := k.caps[max(bi-1, 0)]
		b := k.caps[min(bi+1, len(k.caps)-1)]
		f := func(c float64) float64 { return k.logH(eps, c, dir) }
		gs := numeric.GoldenMax(f, a, b, goldenIters, 0)
		c, v := k.caps[bi], bv
		for _, cand := range [...]struct{ c, v float64 }{{gs.C, gs.FC}, {gs.D, gs.FD}} {
			if cand.v > v {
				c, v = cand.c, cand.v
			}
		}
		if v > best {
			best, bestC = v, c
		}
	}
	if math.IsInf(best, -1) {
		return best, k.cHi
	}
	return best, bestC
}

// epsilon returns the smallest ε ≥ 0 (from below, to 1e-10 relative) at
// which the one-epoch cube bound is ≤ delta: bisection returning the end
// where the bound still exceeds delta, so the true crossing is never
// overstated.
func (k *cube) epsilon(delta, sigma float64) float64 {
	ld := math.Log(delta)
	f := func(eps float64) float64 { v, _ := k.logDelta(eps); return v - ld }
	if f(0) <= 0 {
		return 0
	}
	// The certified one-epoch ε (μ = 1/σ) bounds the crossing from above.
	hi, _ := privacy.GaussianEpsilon(1/sigma, delta)
	hi = 2*hi + 1
	for i := 0; f(hi) > 0 && i < 64; i++ {
		hi *= 2
	}
	lo := 0.0
	for i := 0; i < 200 && hi-lo > 1e-10*math.Max(1, hi); i++ {
		mid := lo + 0.5*(hi-lo)
		if f(mid) > 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// singleEpochPLDs returns the optimistic one-epoch PLDs of the sliced max
// statistic in both directions (P‖Q and Q‖P).
func (k *cube) singleEpochPLDs() (*[2]*pld.PMF, error) {
	gap := sliceLoss * k.sigma * k.sigma
	n := int(math.Ceil((k.cHi - k.cLo) / gap))
	if n > maxSlices {
		n = maxSlices
		gap = (k.cHi - k.cLo) / float64(n)
	}
	type ends struct{ inP, inQ, outP, outQ float64 }
	e := make([]ends, n+1)
	for j := range e {
		c := k.cLo + float64(j)*gap
		inP, inQ := k.logIn(c, meanUpper), k.logIn(c, meanLower)
		e[j] = ends{inP, inQ, math.Log(-math.Expm1(inP)), math.Log(-math.Expm1(inQ))}
	}
	// Atoms: max ≤ cLo, the n slices, max > cHi; log masses under P and Q.
	lp := make([]float64, 0, n+2)
	lq := make([]float64, 0, n+2)
	lp = append(lp, e[0].inP)
	lq = append(lq, e[0].inQ)
	ln05 := -math.Ln2
	for j := 0; j < n; j++ {
		if e[j+1].inQ < ln05 { // thin lower tail: difference of in-cube masses
			lp = append(lp, numeric.LogSubExp(e[j+1].inP, e[j].inP))
			lq = append(lq, numeric.LogSubExp(e[j+1].inQ, e[j].inQ))
		} else {
			lp = append(lp, numeric.LogSubExp(e[j].outP, e[j+1].outP))
			lq = append(lq, numeric.LogSubExp(e[j].outQ, e[j+1].outQ))
		}
	}
	lp = append(lp, e[n].outP)
	lq = append(lq, e[n].outQ)

	var out [2]*pld.PMF
	for dir := 0; dir < 2; dir++ {
		a, b := lp, lq // dir 0: P‖Q, mass P(slice) at ln(P/Q)
		if dir == 1 {
			a, b = lq, lp
		}
		losses := make([]float64, 0, len(a))
		masses := make([]float64, 0, len(a))
		lo, hi := math.Inf(1), math.Inf(-1)
		for i := range a {
			if math.IsInf(a[i], -1) {
				continue
			}
			l := a[i] - b[i] // +Inf where the other mixture has no mass
			losses = append(losses, l)
			masses = append(masses, math.Exp(a[i]))
			if !math.IsInf(l, 0) {
				lo, hi = math.Min(lo, l), math.Max(hi, l)
			}
		}
		interval := lossInterval
		for (hi-lo)/interval > maxSingleLen {
			interval *= 2
		}
		p, err := pld.FromLosses(losses, masses, 0, interval, false)
		if err != nil {
			return nil, fmt.Errorf("shuffle: one-epoch PLD (sigma = %g, rounds = %g): %w", k.sigma, k.t, err)
		}
		out[dir] = p
	}
	return &out, nil
}
