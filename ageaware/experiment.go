package ageaware

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/dpsgd/dpsgd/internal/seedmix"
	"github.com/dpsgd/dpsgd/privacy"
)

// Scheduling is how the server picks the collection times.
type Scheduling int

const (
	// SchedRandom draws each client's collection time uniformly from
	// {0, …, t_agg}, independently (Lin et al.'s schemes 1 and 2).
	SchedRandom Scheduling = iota
	// SchedProposed minimizes Theorem 1's bound (schemes 3 and 4).
	SchedProposed
	// SchedOptimal minimizes the Monte Carlo estimate of the expected loss
	// difference (2a) (schemes 5 and 6).
	SchedOptimal
)

var schedulingNames = [...]string{"random", "proposed", "optimal"}

func (s Scheduling) String() string { return enumName("Scheduling", schedulingNames[:], s) }

// enumName returns names[v], or "typ(v)" for a v outside names: the String of
// this package's enumerations that have a table of names.
func enumName[T ~int](typ string, names []string, v T) string {
	if v < 0 || int(v) >= len(names) {
		return fmt.Sprintf("%s(%d)", typ, int(v))
	}
	return names[v]
}

// Scheme is one of Lin et al.'s six schemes: a scheduling and a noise mode.
type Scheme struct {
	Scheduling Scheduling
	Noise      NoiseMode
}

// String returns "scheduling+noise", e.g. "proposed+adaptive".
func (s Scheme) String() string { return s.Scheduling.String() + "+" + s.Noise.String() }

// Schemes returns Lin et al.'s six schemes in their order 1)–6): random,
// proposed and optimal scheduling, each with constant then adaptive noise.
func Schemes() []Scheme {
	var out []Scheme
	for _, sc := range []Scheduling{SchedRandom, SchedProposed, SchedOptimal} {
		for _, n := range []NoiseMode{NoiseConstant, NoiseAdaptive} {
			out = append(out, Scheme{sc, n})
		}
	}
	return out
}

// ParseScheme parses "scheduling+noise" (see Scheme.String).
func ParseScheme(s string) (Scheme, error) {
	for _, sc := range Schemes() {
		if sc.String() == s {
			return sc, nil
		}
	}
	names := make([]string, 0, 6)
	for _, sc := range Schemes() {
		names = append(names, sc.String())
	}
	return Scheme{}, fmt.Errorf("ageaware: scheme %q, want one of %s: %w", s, strings.Join(names, ", "), privacy.ErrInvalidArgument)
}

// SearchMethod chooses the schedule search of the proposed and optimal
// schemes.
type SearchMethod int

const (
	// SearchAuto is exhaustive when it is cheap enough (at most
	// AutoExhaustive schedules, and for the optimal scheme at most
	// AutoExhaustiveWork trial evaluations), coordinate descent otherwise.
	SearchAuto SearchMethod = iota
	// SearchExhaustive enumerates all (t_agg + 1)^m schedules.
	SearchExhaustive
	// SearchCoordinate runs Problem.CoordinateDescent.
	SearchCoordinate
)

// Limits of SearchAuto.
const (
	AutoExhaustive     = 1 << 20
	AutoExhaustiveWork = 1 << 31
)

func (s SearchMethod) String() string {
	switch s {
	case SearchAuto:
		return "auto"
	case SearchExhaustive:
		return "exhaustive"
	case SearchCoordinate:
		return "coordinate"
	}
	return fmt.Sprintf("SearchMethod(%d)", int(s))
}

// RunConfig describes an experiment: Lin et al.'s Fig. 3 for a grid of ε̄.
type RunConfig struct {
	Eps          []float64 // targets ε̄ > 0
	Schemes      []Scheme  // nil: Schemes()
	Trials       int       // Monte Carlo trials that evaluate every scheme (≥ 2)
	SearchTrials int       // independent trials the optimal scheme searches on; 0: Trials
	Seed         uint64
	Search       SearchMethod
	// Progress, when not nil, is called after each (ε̄, scheme) point with
	// the number done and the total.
	Progress func(done, total int)
}

// Point is one scheme at one ε̄.
type Point struct {
	Scheme   Scheme
	Eps      float64
	Schedule Schedule // collection times; nil for random scheduling
	// Loss is the Monte Carlo estimate of the expected loss difference (2a)
	// on the evaluation trials (independent of the trials the optimal scheme
	// searched on), with its standard error.
	Loss, LossStdErr float64
	// ExactLoss is the exact expected loss difference (Problem.ExpectedLoss);
	// for random scheduling the mean over all schedules, NaN when there are
	// more than AutoExhaustive of them.
	ExactLoss float64
	// Bound is Theorem 1's bound at Schedule (NaN for random scheduling).
	Bound float64
	// NoisePower is Σ pᵢ²·2ηᵢ², the variance of the aggregate noise (for
	// random scheduling its mean over the evaluation trials' schedules).
	NoisePower float64
	// MeanEpsC is Lin et al.'s ε_c = (1/m)Σ ε_{c,i} (random: the mean over the
	// trials); +Inf when a client needs no noise.
	MeanEpsC float64
	// Evaluations is the number of objective evaluations of the search (0
	// for random scheduling).
	Evaluations int
}

// Result is an experiment's outcome, one Point per ε̄ and scheme (ε̄ major).
type Result struct {
	Points               []Point
	Trials, SearchTrials int
	Seed                 uint64
}

// Run runs the experiment: for each ε̄ and scheme, the schedule (random,
// minimizing Theorem 1's bound, or minimizing the Monte Carlo loss on the
// search trials) and its noise, evaluated on independent trials. The same
// seed gives the same Result. It stops with ctx's error.
func (p *Problem) Run(ctx context.Context, cfg RunConfig) (*Result, error) {
	if len(cfg.Eps) == 0 {
		return nil, fmt.Errorf("ageaware: no ε̄ given, want at least one target: %w", privacy.ErrInvalidArgument)
	}
	levels := make([]*level, len(cfg.Eps))
	for i, e := range cfg.Eps {
		lv, err := p.level(e)
		if err != nil {
			return nil, err
		}
		levels[i] = lv
	}
	schemes := cfg.Schemes
	if schemes == nil {
		schemes = Schemes()
	}
	for _, s := range schemes {
		if s.Scheduling < SchedRandom || s.Scheduling > SchedOptimal || (s.Noise != NoiseConstant && s.Noise != NoiseAdaptive) {
			return nil, fmt.Errorf("ageaware: scheme %v, want one of Schemes(): %w", s, privacy.ErrInvalidArgument)
		}
	}
	if cfg.Trials < 2 {
		return nil, fmt.Errorf("ageaware: Trials = %d, want at least 2: %w", cfg.Trials, privacy.ErrInvalidArgument)
	}
	searchTrials := cfg.SearchTrials
	if searchTrials == 0 {
		searchTrials = cfg.Trials
	}
	if searchTrials < 1 {
		return nil, fmt.Errorf("ageaware: SearchTrials = %d, want at least 1 (0: Trials): %w", cfg.SearchTrials, privacy.ErrInvalidArgument)
	}
	if cfg.Search < SearchAuto || cfg.Search > SearchCoordinate {
		return nil, fmt.Errorf("ageaware: Search = %d, want SearchAuto, SearchExhaustive or SearchCoordinate: %w", int(cfg.Search), privacy.ErrInvalidArgument)
	}
	eval, err := p.Simulate(ctx, cfg.Trials, seedmix.Next(cfg.Seed^0x6576_616c)) // "eval"
	if err != nil {
		return nil, err
	}
	needSearch := false
	for _, s := range schemes {
		needSearch = needSearch || s.Scheduling == SchedOptimal
	}
	var search *Sample
	if needSearch {
		search, err = p.Simulate(ctx, searchTrials, seedmix.Next(cfg.Seed^0x7365_6172_6368)) // "search"
		if err != nil {
			return nil, err
		}
	}
	// Random schedules: one per evaluation trial, shared by every ε̄ and
	// noise mode.
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7261_6e64)) // "rand"
	randomAges := make([]int, cfg.Trials*p.m)
	for i := range randomAges {
		randomAges[i] = rng.IntN(p.T + 1)
	}
	res := &Result{Trials: cfg.Trials, SearchTrials: searchTrials, Seed: cfg.Seed}
	total, done := len(levels)*len(schemes), 0
	epsC, eta := make([]float64, p.m), make([]float64, p.m)
	for _, lv := range levels {
		for _, sc := range schemes {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			pt := Point{Scheme: sc, Eps: lv.epsBar, ExactLoss: math.NaN(), Bound: math.NaN()}
			switch sc.Scheduling {
			case SchedRandom:
				p.evalRandom(eval, lv, sc.Noise, randomAges, &pt)
			default:
				obj := func(ages []int) float64 {
					p.scales(lv, sc.Noise, ages, epsC, eta)
					return p.bound(ages, eta, nil)
				}
				work := 1.0
				if sc.Scheduling == SchedOptimal {
					cache := search.newLossCache()
					obj = func(ages []int) float64 {
						p.scales(lv, sc.Noise, ages, epsC, eta)
						return cache.loss(ages, eta)
					}
					work = float64(searchTrials * p.m)
				}
				r, err := p.search(ctx, cfg.Search, obj, work)
				if err != nil {
					return nil, err
				}
				ages := r.Schedule.Ages(p.T)
				pt.Schedule, pt.Evaluations = r.Schedule, r.Evaluations
				p.scales(lv, sc.Noise, ages, epsC, eta)
				pt.Loss, pt.LossStdErr = eval.loss(ages, eta)
				pt.ExactLoss = p.expectedLoss(ages, eta)
				pt.Bound = p.bound(ages, eta, nil)
				pt.NoisePower = p.noisePower(eta)
				pt.MeanEpsC = mean(epsC)
			}
			res.Points = append(res.Points, pt)
			done++
			if cfg.Progress != nil {
				cfg.Progress(done, total)
			}
		}
	}
	return res, nil
}

// search runs the configured search; work is the cost of one evaluation in
// trial evaluations (1 for the bound).
func (p *Problem) search(ctx context.Context, method SearchMethod, obj Objective, work float64) (*SearchResult, error) {
	n := p.Schedules()
	if method == SearchExhaustive || method == SearchAuto && n <= AutoExhaustive && n*work <= AutoExhaustiveWork {
		return p.Exhaustive(ctx, obj)
	}
	return p.CoordinateDescent(ctx, obj, nil)
}

// evalRandom evaluates random scheduling: trial t uses the ages
// randomAges[t·m:(t+1)·m].
func (p *Problem) evalRandom(eval *Sample, lv *level, mode NoiseMode, randomAges []int, pt *Point) {
	epsC, eta := make([]float64, p.m), make([]float64, p.m)
	var w welford
	var power, ec float64
	for t := 0; t < eval.trials; t++ {
		ages := randomAges[t*p.m : (t+1)*p.m]
		p.scales(lv, mode, ages, epsC, eta)
		w.add(eval.trialLoss(t, ages, eta))
		power += p.noisePower(eta)
		ec += mean(epsC)
	}
	nt := float64(eval.trials)
	pt.Loss, pt.LossStdErr = w.mean, w.stderr()
	pt.NoisePower, pt.MeanEpsC = power/nt, ec/nt
	if p.Schedules() <= AutoExhaustive {
		sum, cnt := 0.0, 0
		_, _ = p.Exhaustive(context.Background(), func(ages []int) float64 {
			p.scales(lv, mode, ages, epsC, eta)
			sum += p.expectedLoss(ages, eta)
			cnt++
			return 0
		})
		pt.ExactLoss = sum / float64(cnt)
	}
}

func mean(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}
