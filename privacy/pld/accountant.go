package pld

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/dpsgd/dpsgd/privacy"
)

// cacheSize is the number of composed PLDs (step counts) a
// PoissonAccountant keeps.
const cacheSize = 8

// PoissonAccountant is the PLD accountant of DP-SGD with Poisson sampling
// (each example in each step independently with probability q) and Gaussian
// noise of multiplier σ, under add/remove-one adjacency (Mironov,
// Talwar & Zhang 2019; dp_accounting PLDAccountant with PoissonSampledDpEvent). It
// discretizes one step pessimistically (PoissonGaussian, connect-the-dots)
// in both directions, composes each over the steps by FFT, and reports the
// larger δ (resp. ε) of the two directions, so its numbers are upper bounds:
// never below the true ε or δ.
//
// Composed PLDs are cached per step count (the last 8), so asking once per
// epoch, or several δ at the same steps, costs one composition each. A
// PoissonAccountant is safe for concurrent use.
type PoissonAccountant struct {
	q, sigma float64
	opts     Options

	mu     sync.Mutex
	single map[float64]*[2]*PMF // per interval: remove, add
	cache  *Cache[*[2]*PMF]     // composed per steps
}

var _ privacy.Accountant = (*PoissonAccountant)(nil)

// NewPoissonAccountant returns the PLD accountant for sampling rate q in
// (0, 1] and noise multiplier σ > 0. At most one Options may be given; its
// zero fields select the defaults (Δ = 1e-4).
func NewPoissonAccountant(q, sigma float64, opts ...Options) (*PoissonAccountant, error) {
	if err := checkQSigma(q, sigma); err != nil {
		return nil, fmt.Errorf("pld: NewPoissonAccountant: %w", err)
	}
	if len(opts) > 1 {
		return nil, fmt.Errorf("pld: NewPoissonAccountant: %d Options given, want at most 1: %w", len(opts), privacy.ErrInvalidArgument)
	}
	var o Options
	if len(opts) == 1 {
		o = opts[0]
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("pld: NewPoissonAccountant: %w", err)
	}
	return &PoissonAccountant{
		q: q, sigma: sigma, opts: o,
		single: make(map[float64]*[2]*PMF),
		cache:  NewCache[*[2]*PMF](cacheSize),
	}, nil
}

// Name returns "pld".
func (a *PoissonAccountant) Name() string { return "pld" }

// Sampler returns privacy.SamplerPoisson.
func (a *PoissonAccountant) Sampler() string { return privacy.SamplerPoisson }

// Adjacency returns privacy.AdjacencyAddRemove.
func (a *PoissonAccountant) Adjacency() string { return privacy.AdjacencyAddRemove }

// SamplingRate returns q.
func (a *PoissonAccountant) SamplingRate() float64 { return a.q }

// Sigma returns the noise multiplier σ.
func (a *PoissonAccountant) Sigma() float64 { return a.sigma }

// PLDs returns the composed pessimistic PMFs after steps ≥ 1 steps, in the
// remove and the add direction.
func (a *PoissonAccountant) PLDs(steps int) (remove, add *PMF, err error) {
	if steps < 1 {
		return nil, nil, fmt.Errorf("pld: PLDs: steps = %d out of range [1, +Inf): %w", steps, privacy.ErrInvalidArgument)
	}
	c, err := a.composed(steps)
	if err != nil {
		return nil, nil, err
	}
	return c[0], c[1], nil
}

// maxSingleLen bounds the grid of one step: the interval is doubled from
// Options.Interval until the single-step loss range fits (a coarser grid is
// still pessimistic; this only matters for σ ≲ 0.1).
const maxSingleLen = 1 << 21

// composed returns the cached or newly composed PMFs after steps ≥ 1 steps.
// If the composition window does not fit the grid limit, the interval is
// doubled (coarser is still pessimistic) until it does.
func (a *PoissonAccountant) composed(steps int) (*[2]*PMF, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.cache.Get(steps); ok {
		return c, nil
	}
	interval := a.opts.Interval
	lmin, lmax := newPoissonGaussian(a.q, a.sigma, Remove).lossRange(a.opts.TailMass)
	for (lmax-lmin)/interval > maxSingleLen {
		interval *= 2
	}
	// The loss range alone can push the interval past 1 (a tiny σ): then no grid is tried, and
	// the refusal is still a too-large grid.
	lastErr := fmt.Errorf("%w: the privacy-loss range [%g, %g] needs an interval above 1", ErrGridTooLarge, lmin, lmax)
	for ; interval <= 1; interval *= 2 {
		c, err := a.composeAt(steps, interval)
		if errors.Is(err, ErrGridTooLarge) {
			lastErr = err
			continue
		}
		if err != nil {
			return nil, err
		}
		a.cache.Put(steps, c)
		return c, nil
	}
	return nil, fmt.Errorf("pld: q = %g, sigma = %g, steps = %d: %w", a.q, a.sigma, steps, lastErr)
}

// composeAt composes both directions at one interval (a.mu held), the
// remove direction's error first if both fail, as composing them one after
// the other would.
func (a *PoissonAccountant) composeAt(steps int, interval float64) (*[2]*PMF, error) {
	s, ok := a.single[interval]
	if !ok {
		o := Options{Interval: interval, TailMass: a.opts.TailMass}
		both, err := poissonGaussianPair(a.q, a.sigma, o, [2]bool{Remove: true, Add: true})
		if err != nil {
			return nil, err
		}
		s = &both
		a.single[interval] = s
	}
	// The two directions are independent: composed on two goroutines.
	var c [2]*PMF
	var errs [2]error
	var wg sync.WaitGroup
	for i, p := range s {
		wg.Go(func() { c[i], errs[i] = p.SelfCompose(steps) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// checkSteps validates steps ≥ 0.
func checkSteps(steps int) error {
	if steps < 0 {
		return fmt.Errorf("steps = %d out of range [0, +Inf): %w", steps, privacy.ErrInvalidArgument)
	}
	return nil
}

// Epsilon returns the smallest ε ≥ 0 with δ(ε) ≤ delta in both directions
// after steps steps (exact on the pessimistic discretized PLD, then rounded
// up by ulps; see PMF.EpsilonForDelta). Zero steps give 0.
func (a *PoissonAccountant) Epsilon(steps int, delta float64) (float64, error) {
	if err := checkSteps(steps); err != nil {
		return 0, fmt.Errorf("pld: Epsilon: %w", err)
	}
	if !(delta > 0 && delta < 1) {
		return 0, fmt.Errorf("pld: Epsilon: delta = %g out of range (0, 1): %w", delta, privacy.ErrInvalidArgument)
	}
	if steps == 0 {
		return 0, nil
	}
	c, err := a.composed(steps)
	if err != nil {
		return 0, err
	}
	var eps float64
	for _, p := range c {
		e, err := p.EpsilonForDelta(delta)
		if err != nil {
			return 0, fmt.Errorf("pld: Epsilon: q = %g, sigma = %g, steps = %d: %w", a.q, a.sigma, steps, err)
		}
		eps = math.Max(eps, e)
	}
	return eps, nil
}

// Delta returns the larger δ(eps) of the two directions after steps steps
// (eps ≥ 0; +Inf gives the mass at infinity). Zero steps give 0.
func (a *PoissonAccountant) Delta(steps int, eps float64) (float64, error) {
	if err := checkSteps(steps); err != nil {
		return 0, fmt.Errorf("pld: Delta: %w", err)
	}
	if !(eps >= 0) {
		return 0, fmt.Errorf("pld: Delta: eps = %g out of range [0, +Inf]: %w", eps, privacy.ErrInvalidArgument)
	}
	if steps == 0 {
		return 0, nil
	}
	c, err := a.composed(steps)
	if err != nil {
		return 0, err
	}
	return math.Max(c[0].delta(eps), c[1].delta(eps)), nil
}
