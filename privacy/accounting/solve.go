package accounting

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/ball"
	"github.com/dpsgd/dpsgd/privacy/pld"
)

// Search ranges of the solvers.
const (
	SigmaMin  = 1e-2 // smallest σ SolveSigma tries
	SigmaMax  = 1e4  // largest σ SolveSigma tries
	RoundsMax = 1e9  // largest M SolveRounds tries
	EpochsMax = 1e6  // largest E SolveEpochs tries
	sigmaRel  = 1e-4 // relative tolerance of SolveSigma
)

// within says whether spec's accountant after steps steps meets target; a
// bound that is out of its regime or cannot certify the target counts as not
// meeting it.
func within(spec Spec, steps int, target privacy.Budget) (bool, error) {
	acc, err := spec.New()
	if err != nil {
		if errors.Is(err, privacy.ErrOutOfRegime) {
			return false, nil
		}
		return false, err
	}
	return accWithin(acc, steps, target)
}

// accWithin is within for a built accountant.
func accWithin(acc privacy.Accountant, steps int, target privacy.Budget) (bool, error) {
	d, err := acc.Delta(steps, target.Epsilon)
	if errors.Is(err, privacy.ErrOutOfRegime) || errors.Is(err, privacy.ErrUnreachable) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return d <= target.Delta, nil
}

// noise describes the noise of spec for messages: "σ = …" or the ball's radius.
func (s Spec) noise() string {
	if s.IsBall() {
		return fmt.Sprintf("ball radius %g (d = %d, Δ = %g)", s.Radius, s.Dim, s.Distance)
	}
	return fmt.Sprintf("σ = %g", s.Sigma)
}

// SolveSigma returns the smallest σ in [SigmaMin, SigmaMax] (to relative
// tolerance 1e-4, rounded up) for which spec's accountant meets target after
// steps steps: δ(target.Epsilon) ≤ target.Delta. A TV target t is the budget
// (0, t). It is SolveSigmaCtx without cancellation or progress; see there for
// the search and for σ the accountant cannot evaluate.
func SolveSigma(spec Spec, steps int, target privacy.Budget) (float64, error) {
	return SolveSigmaCtx(context.Background(), spec, steps, target, sigmaRel, nil)
}

// SolveSigmaTol is SolveSigma to relative tolerance rel in (0, 0.1], still rounded up, so the
// σ it returns always meets target: a coarser rel buys a faster search with a slightly larger σ.
func SolveSigmaTol(spec Spec, steps int, target privacy.Budget, rel float64) (float64, error) {
	if !(rel > 0 && rel <= 0.1) {
		return 0, fmt.Errorf("accounting: σ tolerance %v out of range (0, 0.1]: %w", rel, privacy.ErrInvalidArgument)
	}
	return SolveSigmaCtx(context.Background(), spec, steps, target, rel, nil)
}

// Probe is one step of the σ search of SolveSigmaCtx, as reported to its
// onProbe callback.
type Probe struct {
	// N counts the probes of spec's accountant: 1, 2, …; 0 marks the
	// starting estimate from a cheaper accountant (Accountant says which).
	N int
	// Accountant is the method that evaluated Sigma: spec's, or the cheaper
	// one of the starting estimate.
	Accountant string
	Sigma      float64
	// Epsilon is ε at the target's δ (+Inf where the accountant certifies no ε
	// at that δ, NaN where it was not evaluated) and Delta is δ at the
	// target's ε (NaN where not evaluated). Met says whether Sigma meets the
	// target, decided by Delta ≤ target δ.
	Epsilon, Delta float64
	Met            bool
	// Err, when not nil, says why the accountant gave no δ at Sigma: a σ too
	// small to evaluate (for the PLD accountant, a privacy-loss grid too
	// large), a bound outside its proven regime, or a target it says is
	// unreachable there; the search then counts Sigma as missing the target.
	Err error
	// Lo and Hi bracket the answer after this probe: Lo misses the target
	// (0 while none is known to) and Hi meets it (0 while none is known to).
	Lo, Hi float64
	// Elapsed is the time since the search started.
	Elapsed time.Duration
}

// SolveSigmaCtx is SolveSigmaTol (rel = 0 selects SolveSigma's 1e-4) that
// reports every probe to onProbe (when not nil, called on the caller's
// goroutine, in order) and stops when ctx is done, between probes and, for
// a probe that is still computing, without waiting for it (the abandoned
// computation finishes in the background and is discarded). A stopped
// search returns an error wrapping ctx.Err().
//
// The search. Every accountant here gives a δ at fixed ε (and an ε at fixed
// δ) that does not increase with σ: the Rényi bound of the sampled Gaussian
// mechanism (Mironov, Talwar and Zhang, "Rényi Differential Privacy of the
// Sampled Gaussian Mechanism") order by order, the Gaussian-DP closed forms
// through μ; the PLD accountant discretizes the true, monotone privacy loss
// pessimistically, and where a small σ makes it coarsen its grid (by
// doubling the interval, so onto a subset of the grid) it only adds
// pessimism. So "σ meets the target" is a threshold in σ, up to
// discretization effects that can only cost optimality, never validity: the
// σ returned was evaluated and meets the target. The search brackets the
// threshold from a starting σ and then narrows the bracket (see refine); both
// steps use f = ln(δ/δ_target) at the target's ε, which is close to linear
// in σ² for Gaussian noise, so that typically 5 to 10 probes suffice. The
// start is, for the PLD accountant, the σ of the fast, looser RDP bound,
// within a few percent of PLD's after many steps (a factor up to about 6
// above it for a few steps at a small q), so that the PLD accountant, whose
// composition takes seconds for σ ≲ 0.5 and is beyond its grid's reach for
// σ ≈ 0.01, is probed near the answer only. Other accountants start at σ = 1.
// Both the fine and a coarser search return a σ in [σ*, σ*·(1+rel)], σ* the
// threshold, so a coarser rel gives at least the finer σ/(1+1e-4).
//
// A σ that the accountant cannot evaluate because it is too small (the PLD
// privacy-loss grid outgrows its limit, pld.ErrGridTooLarge, or a non-finite
// δ) counts as missing the target (a small σ means a large ε), as do σ
// outside a bound's proven regime (privacy.ErrOutOfRegime) and σ at which the
// accountant says the target is unreachable; the search moves up. The σ
// returned was always evaluated and meets the target. Only when no σ up to
// SigmaMax can be evaluated, or none meets the target, is there an error
// wrapping privacy.ErrUnreachable, which names the σ range probed and why.
// Any other error of the accountant (a genuine invalid argument) ends the
// search and is returned.
func SolveSigmaCtx(ctx context.Context, spec Spec, steps int, target privacy.Budget, rel float64, onProbe func(Probe)) (float64, error) {
	if rel == 0 {
		rel = sigmaRel
	}
	if !(rel > 0 && rel <= 0.1) {
		return 0, fmt.Errorf("accounting: σ tolerance %v out of range (0, 0.1]: %w", rel, privacy.ErrInvalidArgument)
	}
	if err := target.Validate(); err != nil {
		return 0, err
	}
	if steps < 0 {
		return 0, fmt.Errorf("accounting: steps = %d out of range [0, +Inf): %w", steps, privacy.ErrInvalidArgument)
	}
	if spec.IsBall() {
		return 0, fmt.Errorf("accounting: SolveSigma: mechanism ball has no σ, use SolveRadius: %w", privacy.ErrInvalidArgument)
	}
	// Everything but σ is checked once, at σ = 1, so that an error at a probe
	// can only come from σ.
	probe := spec
	probe.Sigma = 1
	if err := probe.Validate(); err != nil {
		return 0, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	s := &sigmaSearch{ctx: ctx, spec: spec, steps: steps, target: target, onProbe: onProbe, start: time.Now()}
	sigma, err := s.solve(rel)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return 0, fmt.Errorf("accounting: σ search for %s/%s stopped after %d probes (%.1f s)%s: %w",
			spec.Sampler, spec.Method, s.n, time.Since(s.start).Seconds(), s.bracket(), err)
	}
	return sigma, err
}

// sigmaSearch is the state of one SolveSigmaCtx.
type sigmaSearch struct {
	ctx     context.Context
	spec    Spec
	steps   int
	target  privacy.Budget
	onProbe func(Probe)
	start   time.Time
	// build, when not nil, replaces spec.New at a probe's σ.
	build func(sigma float64) (privacy.Accountant, error)

	n      int     // probes of spec's accountant so far
	lo, hi float64 // largest σ probed that misses, smallest that meets (0: none)
	// minProbe is the smallest σ probed; badHi the largest σ the accountant
	// could not evaluate (0: none), and badErr why.
	minProbe, badHi float64
	badErr          error
}

// bracket describes the bracket found so far, for messages.
func (s *sigmaSearch) bracket() string {
	switch {
	case s.lo > 0 && s.hi > 0:
		return fmt.Sprintf(", σ between %.6g and %.6g", s.lo, s.hi)
	case s.hi > 0:
		return fmt.Sprintf(", σ at most %.6g", s.hi)
	case s.lo > 0:
		return fmt.Sprintf(", σ above %.6g", s.lo)
	}
	return ""
}

// Bracketing: the first step away from an RDP estimate and from the default
// start σ = 1 (each further step without a model squares it), how far a step
// guided by the model may jump, and how far beyond the model's root it aims.
const (
	ratioEstimate = 1.05
	ratioDefault  = 2
	sigmaDefault  = 1
	jumpMax       = 10
	overshoot     = 1.02
)

// point is a probed σ and f = ln(δ/δ_target) there (δ at the target's ε).
type point struct{ sigma, f float64 }

// finite says whether f is a usable value for interpolation.
func (p point) finite() bool { return !math.IsInf(p.f, 0) && !math.IsNaN(p.f) }

// rootModel returns the σ at which f would cross 0 by the points a and b:
// linear in σ², as ln δ of a Gaussian mechanism nearly is, through both
// points if they have finite f of one sign, else ln δ proportional to σ²
// through b alone. ok is false when neither model gives a σ > 0.
func rootModel(a, b point, lnTarget float64) (sigma float64, ok bool) {
	if !b.finite() || b.f == 0 {
		return 0, false
	}
	if a.sigma > 0 && a.finite() && a.f != b.f && (a.f < 0) == (b.f < 0) {
		ua, ub := a.sigma*a.sigma, b.sigma*b.sigma
		if u := ub - b.f*(ub-ua)/(b.f-a.f); u > 0 {
			return math.Sqrt(u), true
		}
	}
	if lnD := b.f + lnTarget; lnD < 0 {
		return b.sigma * math.Sqrt(lnTarget/lnD), true
	}
	return 0, false
}

func (s *sigmaSearch) solve(rel float64) (float64, error) {
	sigma0, ratio := float64(sigmaDefault), float64(ratioDefault)
	if est, ok := s.estimate(); ok {
		sigma0, ratio = est, ratioEstimate
	}
	sigma0 = min(max(sigma0, SigmaMin), SigmaMax)
	lnTarget := math.Log(s.target.Delta)
	ok, f, err := s.at(sigma0)
	if err != nil {
		return 0, err
	}
	var prev, lo, hi point
	if ok {
		// Down until a σ misses the target: to a little below the model's
		// root, at most jumpMax down, or by the ratio without a model.
		hi = point{sigma0, f}
		for {
			if hi.sigma <= SigmaMin {
				return SigmaMin, nil
			}
			next := hi.sigma / ratio
			if r, ok := rootModel(prev, hi, lnTarget); ok && r < hi.sigma {
				next = min(max(r/overshoot, hi.sigma/jumpMax), hi.sigma/overshoot)
			} else {
				ratio = min(ratio*ratio, 1e6)
			}
			next = max(next, SigmaMin)
			if ok, f, err = s.at(next); err != nil {
				return 0, err
			}
			if !ok {
				lo = point{next, f}
				break
			}
			prev, hi = hi, point{next, f}
		}
	} else {
		// Up until a σ meets it, likewise.
		lo = point{sigma0, f}
		for {
			if lo.sigma >= SigmaMax {
				return 0, s.unreachable()
			}
			next := lo.sigma * ratio
			if r, ok := rootModel(prev, lo, lnTarget); ok && r > lo.sigma {
				next = max(min(r*overshoot, lo.sigma*jumpMax), lo.sigma*overshoot)
			} else {
				ratio = min(ratio*ratio, 1e6)
			}
			next = min(next, SigmaMax)
			if ok, f, err = s.at(next); err != nil {
				return 0, err
			}
			if ok {
				hi = point{next, f}
				break
			}
			prev, lo = lo, point{next, f}
		}
	}
	return s.refine(lo, hi, rel)
}

// refine narrows a bracket, lo missing the target (f > 0) and hi meeting it
// (f ≤ 0), until hi ≤ lo·(1+rel), and returns hi. It interpolates f
// linearly in σ² (regula falsi, with the Illinois halving of an end's f that
// two probes in a row kept) and probes 0.45·rel (in ln σ) from the estimate
// toward the farther end, and at least that far inside the bracket: once the
// estimate is that good, two probes close the bracket from both sides. It
// bisects geometrically when the bracket did not halve over the last two
// probes or f is not finite at an end, so it never takes much more than
// twice bisection's probes.
func (s *sigmaSearch) refine(lo, hi point, rel float64) (float64, error) {
	tol := math.Log1p(rel)
	xlo, xhi := math.Log(lo.sigma), math.Log(hi.sigma)
	w2, w1 := math.Inf(1), math.Inf(1) // the bracket's width two and one probes ago
	flo, fhi := lo.f, hi.f             // f at the ends, the one kept twice halved (Illinois)
	kept := 0                          // the end kept by the last probe: −1 lo, +1 hi
	for xhi-xlo > tol {
		w := xhi - xlo
		x := xlo + w/2
		if w <= w2/2 && flo > 0 && fhi < 0 && !math.IsInf(flo, 0) && !math.IsInf(fhi, 0) {
			ul, uh := lo.sigma*lo.sigma, hi.sigma*hi.sigma
			x = 0.5 * math.Log(uh-fhi*(uh-ul)/(fhi-flo))
			if xhi-x > x-xlo {
				x += 0.45 * tol
			} else {
				x -= 0.45 * tol
			}
			edge := min(0.45*tol, w/2)
			switch {
			case !(x > xlo+edge): // also NaN
				x = xlo + edge
			case !(x < xhi-edge):
				x = xhi - edge
			}
		}
		w2, w1 = w1, w
		sigma := math.Exp(x)
		if !(sigma > lo.sigma && sigma < hi.sigma) {
			break // no float between the ends
		}
		ok, f, err := s.at(sigma)
		if err != nil {
			return 0, err
		}
		if ok {
			hi, xhi, fhi = point{sigma, f}, x, f
			if kept == -1 {
				flo /= 2
			}
			kept = -1
		} else {
			lo, xlo, flo = point{sigma, f}, x, f
			if kept == 1 {
				fhi /= 2
			}
			kept = 1
		}
	}
	return hi.sigma, nil
}

// unreachable is the error when SigmaMax misses the target.
func (s *sigmaSearch) unreachable() error {
	t, sp := s.target, s.spec
	if s.badHi >= SigmaMax {
		return fmt.Errorf("accounting: %s/%s cannot evaluate any σ probed in [%g, %g] for the target (ε = %g, δ = %g) after %d steps (%v): %w",
			sp.Sampler, sp.Method, s.minProbe, SigmaMax, t.Epsilon, t.Delta, s.steps, s.badErr, privacy.ErrUnreachable)
	}
	why := ""
	if s.badHi > 0 {
		why = fmt.Sprintf(" (σ ≤ %g could not be evaluated: %v)", s.badHi, s.badErr)
	}
	return fmt.Errorf("accounting: target (ε = %g, δ = %g) after %d steps is not met by %s/%s for any σ ≤ %g%s: %w",
		t.Epsilon, t.Delta, s.steps, sp.Sampler, sp.Method, SigmaMax, why, privacy.ErrUnreachable)
}

// estimate returns the starting σ for the PLD accountant: the σ of the RDP
// accountant of the same Poisson subsampled Gaussian, to 1e-3, on the integer
// orders of privacy.DefaultOrders only (an upper bound a little looser than
// RDP's own; the fractional orders' series converge slowly for large σ and
// q). It reports the estimate as probe 0. ok is false for other accountants,
// or when RDP finds no σ.
func (s *sigmaSearch) estimate() (sigma float64, ok bool) {
	if s.spec.Method != MethodPLD {
		return 0, false
	}
	var q float64
	switch s.spec.Sampler {
	case privacy.SamplerPoisson:
		q = s.spec.SampleRate
	case privacy.SamplerShuffle: // what Poisson accounting with q = 1/M would claim
		q = 1 / float64(s.spec.Rounds)
	default:
		return 0, false
	}
	var orders []float64
	for _, a := range privacy.DefaultOrders() {
		if a == math.Trunc(a) {
			orders = append(orders, a)
		}
	}
	build := func(sigma float64) (privacy.Accountant, error) { return privacy.NewPoissonRDP(q, sigma, orders) }
	rdp := s.spec
	rdp.Method = MethodRDP
	e := &sigmaSearch{ctx: s.ctx, spec: rdp, build: build, steps: s.steps, target: s.target, start: s.start}
	sigma, err := e.solve(1e-3)
	if err != nil {
		return 0, false
	}
	if s.onProbe != nil {
		p := Probe{Accountant: MethodRDP, Sigma: sigma, Epsilon: math.NaN(), Delta: math.NaN(), Met: true, Elapsed: time.Since(s.start)}
		if acc, err := build(sigma); err == nil {
			p.Epsilon = reportEps(acc, s.steps, s.target)
			if d, err := acc.Delta(s.steps, s.target.Epsilon); err == nil {
				p.Delta = d
			}
		}
		s.onProbe(p)
	}
	return sigma, true
}

// probeResult is what one probe computes.
type probeResult struct {
	met        bool
	eps, delta float64
	bad        error // σ too small for the accountant
	miss       error // out of regime or unreachable: counts as missing
	err        error // any other error: fatal
}

// at probes σ with spec's accountant: whether it meets the target, and
// ln(δ/δ_target) at the target's ε (+Inf where σ is too small to evaluate or
// counts as missing for another reason). It reports the probe and keeps the
// bracket.
func (s *sigmaSearch) at(sigma float64) (bool, float64, error) {
	if err := s.ctx.Err(); err != nil {
		return false, 0, err
	}
	var r probeResult
	if s.ctx.Done() == nil {
		r = s.eval(sigma)
	} else {
		ch := make(chan probeResult, 1) // buffered: an abandoned probe still exits
		go func() { ch <- s.eval(sigma) }()
		select {
		case r = <-ch:
		case <-s.ctx.Done():
			return false, 0, s.ctx.Err()
		}
	}
	if r.err != nil {
		return false, 0, fmt.Errorf("accounting: %s/%s at σ = %g: %w", s.spec.Sampler, s.spec.Method, sigma, r.err)
	}
	s.n++
	if s.minProbe == 0 || sigma < s.minProbe {
		s.minProbe = sigma
	}
	if r.bad != nil && sigma > s.badHi {
		s.badHi, s.badErr = sigma, r.bad
	}
	if r.met && (s.hi == 0 || sigma < s.hi) {
		s.hi = sigma
	}
	if !r.met && sigma > s.lo {
		s.lo = sigma
	}
	if s.onProbe != nil {
		why := r.bad
		if why == nil {
			why = r.miss
		}
		s.onProbe(Probe{N: s.n, Accountant: s.spec.Method, Sigma: sigma, Epsilon: r.eps, Delta: r.delta, Met: r.met,
			Err: why, Lo: s.lo, Hi: s.hi, Elapsed: time.Since(s.start)})
	}
	f := math.Inf(1)
	if !math.IsNaN(r.delta) {
		f = math.Log(r.delta) - math.Log(s.target.Delta)
	}
	return r.met, f, nil
}

// eval is one probe's computation; it touches no shared state but the
// fields it reads.
func (s *sigmaSearch) eval(sigma float64) probeResult {
	r := probeResult{eps: math.NaN(), delta: math.NaN()}
	sp := s.spec
	sp.Sigma = sigma
	var acc privacy.Accountant
	var err error
	if s.build != nil {
		acc, err = s.build(sigma)
	} else {
		acc, err = sp.New()
	}
	if r.classify(err, false) {
		return r
	}
	d, err := acc.Delta(s.steps, s.target.Epsilon)
	if r.classify(err, true) {
		return r
	}
	if math.IsNaN(d) || math.IsInf(d, 0) {
		r.bad = fmt.Errorf("δ = %g at ε = %g is not finite", d, s.target.Epsilon)
		return r
	}
	r.delta, r.met = d, d <= s.target.Delta
	if s.onProbe != nil {
		r.eps = reportEps(acc, s.steps, s.target)
	}
	return r
}

// classify records err, when not nil, as a miss (σ outside a bound's regime, or, from the
// accountant's answer, a target it says is unreachable there), a σ too small to evaluate, or a
// genuine error, and reports whether there was one.
func (r *probeResult) classify(err error, answered bool) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, privacy.ErrOutOfRegime) || answered && errors.Is(err, privacy.ErrUnreachable):
		r.miss = err
	case tooSmall(err):
		r.bad = err
	default:
		r.err = err
	}
	return true
}

// tooSmall says whether an accountant's error means that σ is too small for
// it to evaluate: the PLD privacy-loss grid outgrowing its limit.
func tooSmall(err error) bool { return errors.Is(err, pld.ErrGridTooLarge) }

// reportEps returns ε at the target's δ for progress reports: +Inf where the
// accountant certifies none, NaN on another error.
func reportEps(acc privacy.Accountant, steps int, target privacy.Budget) float64 {
	eps, err := acc.Epsilon(steps, target.Delta)
	switch {
	case errors.Is(err, privacy.ErrUnreachable):
		return math.Inf(1)
	case err != nil:
		return math.NaN()
	}
	return eps
}

// SolveRounds returns the smallest M (rounds per epoch) in [1, RoundsMax] for
// which spec's accountant meets target after epochs epochs of M rounds (shuffle
// and allocation). It assumes, as holds for the Gaussian pair's bounds, that
// meeting the target at M implies meeting it at every larger M.
func SolveRounds(spec Spec, epochs int, target privacy.Budget) (int, error) {
	if err := target.Validate(); err != nil {
		return 0, err
	}
	if spec.Sampler != privacy.SamplerShuffle && spec.Sampler != privacy.SamplerAllocation {
		return 0, fmt.Errorf("accounting: SolveRounds: sampler = %q, want shuffle or allocation: %w", spec.Sampler, privacy.ErrInvalidArgument)
	}
	if epochs < 1 {
		return 0, fmt.Errorf("accounting: epochs = %d out of range [1, +Inf): %w", epochs, privacy.ErrInvalidArgument)
	}
	at := func(m int) (bool, error) {
		s := spec
		s.Rounds = m
		s.SampleRate = 1 / float64(m)
		return within(s, epochs*m, target)
	}
	// Exponential search for a feasible M, then bisection on integers. at(lo)
	// is false (lo = 0 stands for "none"); at(hi) is to be found true.
	lo, hi, found, err := numeric.Bracket(at, 0, 1, func(_, h int) (int, bool) { return min(2*h, int(RoundsMax)), h < RoundsMax })
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("accounting: target (ε = %g, δ = %g) over %d epochs is not met by %s/%s at %s for any M ≤ %g: %w",
			target.Epsilon, target.Delta, epochs, spec.Sampler, spec.Method, spec.noise(), RoundsMax, privacy.ErrUnreachable)
	}
	return numeric.BisectInt(at, lo, hi)
}

// SolveEpochs returns the largest number of whole epochs E ≤ EpochsMax of
// stepsPerEpoch steps after which spec's accountant still meets target. No
// epoch at all fitting is an error wrapping privacy.ErrUnreachable.
func SolveEpochs(spec Spec, stepsPerEpoch int, target privacy.Budget) (int, error) {
	if err := target.Validate(); err != nil {
		return 0, err
	}
	if stepsPerEpoch < 1 {
		return 0, fmt.Errorf("accounting: steps per epoch = %d out of range [1, +Inf): %w", stepsPerEpoch, privacy.ErrInvalidArgument)
	}
	acc, err := spec.New() // one accountant, so its caches serve every probe
	if err != nil {
		return 0, err
	}
	at := func(e int) (bool, error) { return accWithin(acc, e*stepsPerEpoch, target) }
	ok, err := at(1)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("accounting: target (ε = %g, δ = %g) is exceeded by one epoch of %s/%s at %s: %w",
			target.Epsilon, target.Delta, spec.Sampler, spec.Method, spec.noise(), privacy.ErrUnreachable)
	}
	lo, hi := 1, 2 // at(lo) true, at(hi) to be found false
	for {
		if hi > int(EpochsMax) {
			return int(EpochsMax), nil
		}
		ok, err := at(hi)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		lo, hi = hi, 2*hi
	}
	// The first E that does not fit, minus one.
	first, err := numeric.BisectInt(func(e int) (bool, error) { ok, err := at(e); return !ok, err }, lo, hi)
	return first - 1, err
}

// SolveRadius returns the smallest ball radius (to relative tolerance 1e-10,
// rounded up) at which the ball Spec spec meets target after steps steps:
// DeltaTotal ≤ target.Delta (ball noise gives (0, δ) statements, so
// target.Epsilon does not matter). spec.Radius is ignored. It returns 0 when
// every radius meets the target (Δ = 0, no steps, or the sampling alone), see
// ball.SolveRadiusFor.
func SolveRadius(spec Spec, steps int, target privacy.Budget) (float64, error) {
	if err := target.Validate(); err != nil {
		return 0, err
	}
	if !spec.IsBall() {
		return 0, fmt.Errorf("accounting: SolveRadius: mechanism = %q, want %q: %w", spec.Mechanism, MechanismBall, privacy.ErrInvalidArgument)
	}
	probe := spec
	probe.Radius = 1
	if err := probe.Validate(); err != nil {
		return 0, err
	}
	return ball.SolveRadiusFor(spec.BallConfig(), steps, target.Delta)
}
