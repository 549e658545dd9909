package ageaware

import (
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/privacy"
	pa "github.com/dpsgd/dpsgd/privacy/ageaware"
)

// DeltaSource says how a client obtains Δᵢ(t), the total variation that sets
// its adaptive noise (eq. 4) and its age-dependent guarantee (Proposition 1).
type DeltaSource int

const (
	// DeltaSpectral is the spectral upper bound of [12, Prop. 5], as
	// Section IV of Lin et al. uses it (reversible chains only). The default.
	DeltaSpectral DeltaSource = iota
	// DeltaExact is the exact Δ of the stationary reverse chain.
	DeltaExact
	// DeltaPosterior is the exact Δ for data whose law at collection time is
	// the client's Init rather than π (privacy/ageaware.Chain.PosteriorDelta):
	// the Δ that Proposition 1's argument needs for the simulated model.
	DeltaPosterior
)

var deltaSourceNames = [...]string{"spectral", "exact", "posterior"}

func (d DeltaSource) String() string { return enumName("DeltaSource", deltaSourceNames[:], d) }

// ParseDeltaSource maps "spectral", "exact" or "posterior" to a DeltaSource.
func ParseDeltaSource(s string) (DeltaSource, error) {
	for i, n := range deltaSourceNames {
		if s == n {
			return DeltaSource(i), nil
		}
	}
	return 0, fmt.Errorf("ageaware: Δ source %q, want one of %s: %w", s, strings.Join(deltaSourceNames[:], ", "), privacy.ErrInvalidArgument)
}

// Client is one client of the federation: the Markov chain its records follow,
// the value of each state, the law Init of its data at collection time (the
// paper's μᵢ^{(t_c,i)}) and the number of samples it collects.
type Client struct {
	Chain   [][]float64 // transition matrix Pᵢ (irreducible; reversible for DeltaSpectral)
	Values  []float64   // value of each state (e.g. Wh)
	Init    []float64   // law of a record's state at collection time
	Samples int         // |Dᵢ| ≥ 1
}

// Config is a federation: clients, the aggregation time t_agg and how Δ is
// obtained. Collection times are t_c ∈ {0, 1, …, AggTime}, so a client's data
// have age a = AggTime − t_c ∈ {0, …, AggTime}.
type Config struct {
	Clients []Client
	AggTime int
	Delta   DeltaSource
}

// maxAggTime is the largest t_agg NewProblem accepts (the precomputation is
// linear in it).
const maxAggTime = 4096

// maxPrecompute bounds the multiply-adds of a client's exact laws (the sums of
// its Samples values at every age), about n²·K·states·(t_agg + 2)/2 for n
// samples on a lattice of K steps: a few seconds.
const maxPrecompute = 1e10

// DefaultAggTime is the aggregation time of PaperConfig. The seed does not
// state it; 15 lets every client's data age until the spectral bound of the
// slowest-mixing chains (p, q) = (0.1, 0.2), (0.2, 0.1) falls to 0.27 (it is
// 1 up to age 7), so that aging has something to trade.
const DefaultAggTime = 15

// PaperConfig returns Lin et al.'s Section IV setting: three clients with the
// four-state birth–death chains (p, q) = (0.1, 0.2), (0.2, 0.1), (0.4, 0.4),
// states valued 20, 50, 100, 200 Wh, initial laws μ₁ = [0.8, 0.2, 0, 0],
// μ₂ = [0, 0.1, 0.5, 0.4], μ₃ = [0.2, 0.3, 0.5, 0], 100 samples each;
// t_agg = DefaultAggTime and the spectral bound for Δ, as the paper uses.
func PaperConfig() Config {
	cfg := Config{AggTime: DefaultAggTime, Delta: DeltaSpectral}
	for _, c := range datasets.ElectricityClients() {
		rows, err := datasets.BirthDeathChain(c.P, c.Q)
		if err != nil {
			panic(err) // the preset's constants are valid
		}
		cfg.Clients = append(cfg.Clients, Client{Chain: rows, Values: datasets.ElectricityValues(), Init: c.Init, Samples: c.Samples})
	}
	return cfg
}

// Problem is a validated federation with everything the schemes need
// precomputed: Δᵢ(a) for every age, the laws of the data at t_agg, the exact
// laws of the clients' estimates and the mutual informations of Theorem 1.
// It is safe for concurrent use.
type Problem struct {
	cfg     Config
	m, T    int
	clients []*client
	weights []float64 // pᵢ = |Dᵢ|/|D|
}

// client holds one client's precomputed quantities.
type client struct {
	gen    *datasets.MarkovChain
	init   datasets.Initial
	mu     []float64
	values []float64
	n      int
	lo, hi float64 // hypothesis class [lo, hi] of the client's upload
	sens   float64 // ℓ1-sensitivity of the mean: (hi − lo)/n
	delta  []float64
	// Laws at t_agg of a record collected a steps earlier, a = 0…T.
	fresh     [][]float64 // νₐ = μPᵃ
	freshMean []float64   // E[v(Z)] under νₐ
	freshK    [][3]float64
	h         [][]float64 // hₐ(x) = E[v(Z_agg) | Z_c = x]
	collMean  float64     // E[v(Z)] under μ
	lat       lattice
	pmfS      []float64 // law of the lattice sum of the n collected values
	pmfR      []float64 // … of n − 1 of them
	mi        []float64 // I(Wᵢ; Z_{i,j}^{agg}) by age
	miFresh   []float64 // I(Wᵢ^{agg}; Z_{i,j}^{agg}) by age

	cacheMu sync.Mutex
	cache   map[uint64]*uMoments
}

// uMoments are the moments of a client's projected noisy upload
// U = clip(W + N, lo, hi) for one noise scale.
type uMoments struct {
	mean, c2, c3, c4 float64   // mean and central moments
	cov              []float64 // Cov(U, Fₐ), Fₐ the fresh mean at age a
}

// NewProblem validates cfg and precomputes the federation. It refuses
// (wrapping privacy.ErrInvalidArgument and naming the client and field) no
// clients, AggTime < 0, a chain that privacy/ageaware.NewChain refuses, a
// chain that is not reversible with DeltaSpectral, values that are not one
// finite number per state, an Init that is not a law, and Samples < 1.
func NewProblem(cfg Config) (*Problem, error) {
	if len(cfg.Clients) == 0 {
		return nil, fmt.Errorf("ageaware: no clients, want at least 1: %w", privacy.ErrInvalidArgument)
	}
	if cfg.AggTime < 0 || cfg.AggTime > maxAggTime {
		return nil, fmt.Errorf("ageaware: AggTime = %d, want t_agg in [0, %d]: %w", cfg.AggTime, maxAggTime, privacy.ErrInvalidArgument)
	}
	if cfg.Delta < DeltaSpectral || cfg.Delta > DeltaPosterior {
		return nil, fmt.Errorf("ageaware: Delta = %d, want DeltaSpectral, DeltaExact or DeltaPosterior: %w", int(cfg.Delta), privacy.ErrInvalidArgument)
	}
	p := &Problem{cfg: cfg, m: len(cfg.Clients), T: cfg.AggTime}
	total := 0
	for i, cc := range cfg.Clients {
		if cc.Samples < 1 || cc.Samples > 1<<24 {
			return nil, fmt.Errorf("ageaware: client %d: Samples = %d, want |Dᵢ| in [1, 2^24]: %w", i, cc.Samples, privacy.ErrInvalidArgument)
		}
		total += cc.Samples
	}
	for i, cc := range cfg.Clients {
		c, err := newClient(cc, cfg.AggTime, cfg.Delta)
		if err != nil {
			return nil, fmt.Errorf("ageaware: client %d: %w", i, err)
		}
		p.clients = append(p.clients, c)
		p.weights = append(p.weights, float64(cc.Samples)/float64(total))
	}
	return p, nil
}

func newClient(cc Client, T int, src DeltaSource) (*client, error) {
	chain, err := pa.NewChain(cc.Chain)
	if err != nil {
		return nil, err
	}
	k := chain.States()
	if len(cc.Values) != k {
		return nil, fmt.Errorf("field Values has %d entries, want %d (one per state): %w", len(cc.Values), k, privacy.ErrInvalidArgument)
	}
	mu, err := pa.CheckLaw("Init", cc.Init, k)
	if err != nil {
		return nil, err
	}
	gen, err := datasets.NewMarkovChain(chain.Matrix(), cc.Values)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, privacy.ErrInvalidArgument)
	}
	init, err := gen.Initial(mu)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, privacy.ErrInvalidArgument)
	}
	c := &client{gen: gen, init: init, mu: mu, values: append([]float64(nil), cc.Values...), n: cc.Samples, cache: map[uint64]*uMoments{}}
	c.lo, c.hi = math.Inf(1), math.Inf(-1)
	for _, v := range cc.Values {
		c.lo, c.hi = math.Min(c.lo, v), math.Max(c.hi, v)
	}
	c.sens = (c.hi - c.lo) / float64(c.n)
	switch src {
	case DeltaSpectral:
		c.delta, err = chain.SpectralBoundCurve(T)
	case DeltaExact:
		c.delta, err = chain.DeltaCurve(T)
	case DeltaPosterior:
		c.delta, err = chain.PosteriorDeltaCurve(mu, T)
	}
	if err != nil {
		return nil, err
	}
	p := chain.Matrix()
	law := append([]float64(nil), mu...)
	pt := identity(k)
	var pts [][][]float64 // Pᵃ, a = 0…T
	for x := range mu {
		c.collMean += mu[x] * cc.Values[x]
	}
	for a := 0; a <= T; a++ {
		c.fresh = append(c.fresh, law)
		mean, k2, k3, k4 := cumulants(law, cc.Values)
		c.freshMean = append(c.freshMean, mean)
		c.freshK = append(c.freshK, [3]float64{k2, k3, k4})
		h := make([]float64, k)
		for x := range h {
			for y, q := range pt[x] {
				h[x] += q * cc.Values[y]
			}
		}
		c.h = append(c.h, h)
		pts = append(pts, pt)
		law = vecMat(law, p)
		pt = matMul(pt, p)
	}
	c.lat = newLattice(cc.Values, c.n)
	if work := float64(c.n) * float64(c.n) * float64(max(c.lat.k, 1)) * float64(k) * float64(T+2) / 2; work > maxPrecompute {
		return nil, fmt.Errorf("the exact laws of Samples = %d values on a lattice of %d steps over %d ages need about %.3g operations, want at most %.3g (use fewer samples, a smaller t_agg or coarser values): %w",
			c.n, c.lat.k, T+1, work, float64(maxPrecompute), privacy.ErrInvalidArgument)
	}
	c.pmfR = c.lat.sumPMF(mu, c.n-1)
	c.pmfS = convolve(c.pmfR, mu, c.lat)
	for a := 0; a <= T; a++ {
		nu, pt := c.fresh[a], pts[a]
		pz := nu
		// I(Wᵢ; Z^agg): S = X + R, X | Z = z ~ μ(x)Pᵃ(x, z)/ν(z).
		c.mi = append(c.mi, c.lat.mixtureMI(pz, func(z int, dst []float64) {
			for x := range dst {
				dst[x] = mu[x] * pt[x][z] / nu[z]
			}
		}, c.pmfR))
		// I(Wᵢ^agg; Z^agg): the fresh sum contains Z itself.
		rFresh := c.lat.sumPMF(nu, c.n-1)
		c.miFresh = append(c.miFresh, c.lat.mixtureMI(pz, func(z int, dst []float64) {
			clear(dst)
			dst[z] = 1
		}, rFresh))
	}
	return c, nil
}

// cumulants returns the mean and the cumulants κ₂, κ₃, κ₄ of v(X), X ~ law.
func cumulants(law, v []float64) (mean, k2, k3, k4 float64) {
	for x, q := range law {
		mean += q * v[x]
	}
	var c2, c3, c4 float64
	for x, q := range law {
		d := v[x] - mean
		c2 += q * d * d
		c3 += q * d * d * d
		c4 += q * d * d * d * d
	}
	return mean, c2, c3, c4 - 3*c2*c2
}

func convolve(r, law []float64, l lattice) []float64 {
	out := make([]float64, len(r)+l.k)
	for s, v := range r {
		if v == 0 {
			continue
		}
		for x, q := range law {
			out[s+l.off[x]] += v * q
		}
	}
	return out
}

func identity(n int) [][]float64 {
	out := make([][]float64, n)
	for i := range out {
		out[i] = make([]float64, n)
		out[i][i] = 1
	}
	return out
}

func vecMat(v []float64, p [][]float64) []float64 {
	out := make([]float64, len(v))
	for x, q := range v {
		for y, r := range p[x] {
			out[y] += q * r
		}
	}
	return out
}

func matMul(a, b [][]float64) [][]float64 {
	n := len(a)
	out := make([][]float64, n)
	for i := range out {
		out[i] = make([]float64, n)
		for k, aik := range a[i] {
			if aik == 0 {
				continue
			}
			for j, bkj := range b[k] {
				out[i][j] += aik * bkj
			}
		}
	}
	return out
}

// Clients returns the number of clients m.
func (p *Problem) Clients() int { return p.m }

// AggTime returns t_agg.
func (p *Problem) AggTime() int { return p.T }

// Weights returns the aggregation weights pᵢ = |Dᵢ|/|D|.
func (p *Problem) Weights() []float64 { return append([]float64(nil), p.weights...) }

// Delta returns client i's Δᵢ(a) for a = 0…t_agg (by the Config's source).
func (p *Problem) Delta(i int) []float64 { return append([]float64(nil), p.clients[i].delta...) }

// Sensitivity returns client i's ℓ1-sensitivity sᵢ = (max v − min v)/|Dᵢ|:
// the most one replaced record moves the mean of |Dᵢ| values.
func (p *Problem) Sensitivity(i int) float64 { return p.clients[i].sens }

// Approximate reports whether some client's values were rounded to a lattice
// for the exact laws (see ExpectedLoss and Bound): they are exact otherwise.
func (p *Problem) Approximate() bool {
	for _, c := range p.clients {
		if c.lat.approx {
			return true
		}
	}
	return false
}

// MutualInformation returns client i's I(Wᵢ; Z_{i,j}^{(t_agg)}) and
// I(Wᵢ^{(t_agg)}; Z_{i,j}^{(t_agg)}) (nats) for data of age a: the mutual
// informations of Theorem 1's generalization terms (see Bound).
func (p *Problem) MutualInformation(i, age int) (aged, fresh float64) {
	c := p.clients[i]
	return c.mi[age], c.miFresh[age]
}
