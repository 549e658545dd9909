package datasets

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Time-varying client data from a finite Markov chain (Lin, Lin, Hsu & Huang, "Age aware
// scheduling for differentially-private federated learning", cited as Lin et al.;
// docs/ageaware.md).
//
// Each record (a household, in Lin et al.'s electricity example) is one trajectory of the chain:
// its state at time 0 is drawn from an initial law μ and each later state from the row of the
// transition matrix P at the previous state. A client's dataset at time t is the column t of its
// records' trajectories, so data collected at t_c and the "fresh" data at t_agg belong to the
// same records, t_agg − t_c steps apart.

// markovRowTol is the largest |Σ_y P(x, y) − 1| (and |Σ μ − 1|) that NewMarkovChain and the
// samplers accept; rows within it are rescaled to sum to 1.
const markovRowTol = 1e-9

// MarkovChain generates trajectories of a finite Markov chain whose states carry real values
// (for example electricity use in Wh). It is immutable and safe for concurrent use.
type MarkovChain struct {
	n      int
	cum    []float64 // row-major cumulative sums of each row, the last entry of a row being 1
	values []float64
}

// NewMarkovChain validates the transition matrix p (square, finite entries ≥ 0, each row
// summing to 1 within 1e-9; rows are rescaled to sum to 1 exactly) and the state values (one
// finite value per state) and returns the generator. The chain need not be irreducible here:
// generating data only needs stochastic rows (privacy/ageaware checks irreducibility for the
// privacy calculations).
func NewMarkovChain(p [][]float64, values []float64) (*MarkovChain, error) {
	n := len(p)
	if n == 0 {
		return nil, fmt.Errorf("datasets: Markov chain: transition matrix has no rows, want at least 1 state")
	}
	if len(values) != n {
		return nil, fmt.Errorf("datasets: Markov chain: %d state values for %d states, want one value per state", len(values), n)
	}
	m := &MarkovChain{n: n, cum: make([]float64, n*n), values: append([]float64(nil), values...)}
	for i, v := range values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("datasets: Markov chain: value of state %d = %v, want a finite number", i, v)
		}
	}
	for x, row := range p {
		if len(row) != n {
			return nil, fmt.Errorf("datasets: Markov chain: transition matrix row %d has %d entries, want %d (a square matrix)", x, len(row), n)
		}
		sum := 0.0
		for y, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return nil, fmt.Errorf("datasets: Markov chain: transition matrix entry (%d, %d) = %v, want a finite probability in [0, 1]", x, y, v)
			}
			sum += v
		}
		if math.Abs(sum-1) > markovRowTol {
			return nil, fmt.Errorf("datasets: Markov chain: transition matrix row %d sums to %.12g, want 1 (within %g)", x, sum, markovRowTol)
		}
		fillCum(m.cum[x*n:(x+1)*n], row, sum)
	}
	return m, nil
}

// fillCum writes the cumulative sums of law/sum into dst, with exactly 1 from the last entry
// of positive probability on, so that rounding can never select a state of probability 0.
func fillCum(dst, law []float64, sum float64) {
	c := 0.0
	last := 0
	for i, v := range law {
		c += v / sum
		dst[i] = c
		if v > 0 {
			last = i
		}
	}
	for i := last; i < len(dst); i++ {
		dst[i] = 1
	}
}

// States returns the number of states.
func (m *MarkovChain) States() int { return m.n }

// Values returns a copy of the state values.
func (m *MarkovChain) Values() []float64 { return append([]float64(nil), m.values...) }

// Value returns the value of state s. It panics if s is out of range.
func (m *MarkovChain) Value(s int) float64 { return m.values[s] }

// Matrix returns the (rescaled) transition matrix as rows.
func (m *MarkovChain) Matrix() [][]float64 {
	out := make([][]float64, m.n)
	for x := range out {
		out[x] = make([]float64, m.n)
		prev := 0.0
		for y := range out[x] {
			c := m.cum[x*m.n+y]
			out[x][y] = c - prev
			prev = c
		}
	}
	return out
}

// Step returns the state that follows state x when the uniform draw is u ∈ [0, 1): the first
// y with u < Σ_{y' ≤ y} P(x, y') (inverse CDF). A state whose probability is 0 is never
// returned. It panics if x is out of range.
func (m *MarkovChain) Step(x int, u float64) int {
	return pick(m.cum[x*m.n:(x+1)*m.n], u)
}

// pick returns the first index i with u < cum[i], skipping zero-probability entries (the
// search is strict, so an entry equal to its predecessor is never chosen).
func pick(cum []float64, u float64) int {
	if len(cum) <= 8 {
		for i, c := range cum {
			if u < c {
				return i
			}
		}
		return len(cum) - 1
	}
	lo, hi := 0, len(cum)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if u < cum[mid] {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// Trajectories holds N trajectories of Len = steps + 1 states each (times 0, …, steps),
// row-major: record j's state at time t is States[j·Len + t].
type Trajectories struct {
	N, Len int
	States []int32
}

// State returns record j's state at time t. It panics if j or t is out of range.
func (tr *Trajectories) State(j, t int) int {
	if j < 0 || j >= tr.N || t < 0 || t >= tr.Len {
		panic(fmt.Sprintf("datasets: Trajectories.State(%d, %d) out of range [0, %d)×[0, %d)", j, t, tr.N, tr.Len))
	}
	return int(tr.States[j*tr.Len+t])
}

// Initial is a validated initial law for a chain's samplers (see MarkovChain.Initial).
type Initial struct {
	cum []float64
}

// Initial validates the law mu of the state at time 0 (one finite probability ≥ 0 per state,
// summing to 1 within 1e-9) and returns it ready for sampling.
func (m *MarkovChain) Initial(mu []float64) (Initial, error) {
	if len(mu) != m.n {
		return Initial{}, fmt.Errorf("datasets: Markov chain: initial law has %d entries, want %d (one per state)", len(mu), m.n)
	}
	sum := 0.0
	for i, v := range mu {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return Initial{}, fmt.Errorf("datasets: Markov chain: initial law entry %d = %v, want a finite probability in [0, 1]", i, v)
		}
		sum += v
	}
	if math.Abs(sum-1) > markovRowTol {
		return Initial{}, fmt.Errorf("datasets: Markov chain: initial law sums to %.12g, want 1 (within %g)", sum, markovRowTol)
	}
	cum := make([]float64, m.n)
	fillCum(cum, mu, sum)
	return Initial{cum: cum}, nil
}

// Sample overwrites tr with tr.N trajectories of tr.Len states drawn with rng: each starts
// from init and moves by the chain. It allocates nothing when tr.States has room for
// N·Len states. It panics if init was made by another chain or N, Len are not positive.
func (m *MarkovChain) Sample(tr *Trajectories, init Initial, rng *rand.Rand) {
	if len(init.cum) != m.n {
		panic(fmt.Sprintf("datasets: MarkovChain.Sample: initial law of %d states for a chain of %d", len(init.cum), m.n))
	}
	if tr.N < 1 || tr.Len < 1 {
		panic(fmt.Sprintf("datasets: MarkovChain.Sample: N = %d, Len = %d, want both >= 1", tr.N, tr.Len))
	}
	if cap(tr.States) < tr.N*tr.Len {
		tr.States = make([]int32, tr.N*tr.Len)
	}
	tr.States = tr.States[:tr.N*tr.Len]
	for j := 0; j < tr.N; j++ {
		row := tr.States[j*tr.Len : (j+1)*tr.Len]
		x := pick(init.cum, rng.Float64())
		row[0] = int32(x)
		for t := 1; t < tr.Len; t++ {
			x = pick(m.cum[x*m.n:(x+1)*m.n], rng.Float64())
			row[t] = int32(x)
		}
	}
}

// markovStream is the PCG stream of Trajectories (the seed is the other half of the state).
const markovStream = 0x082e_fa98_ec4e_6c89

// Trajectories draws n trajectories of steps + 1 states (times 0, …, steps) from the initial
// law mu with math/rand/v2's PCG generator seeded by seed: the same arguments give the same
// trajectories on every machine. n must be ≥ 1 and steps ≥ 0.
func (m *MarkovChain) Trajectories(n, steps int, mu []float64, seed uint64) (*Trajectories, error) {
	if n < 1 {
		return nil, fmt.Errorf("datasets: Markov chain: n = %d trajectories, want n >= 1", n)
	}
	if steps < 0 {
		return nil, fmt.Errorf("datasets: Markov chain: steps = %d, want steps >= 0", steps)
	}
	if steps >= math.MaxInt32 || n > math.MaxInt/(steps+1) || n*(steps+1) > 1<<31 {
		return nil, fmt.Errorf("datasets: Markov chain: n·(steps+1) = %d·%d, want at most 2^31 states", n, steps+1)
	}
	init, err := m.Initial(mu)
	if err != nil {
		return nil, err
	}
	tr := &Trajectories{N: n, Len: steps + 1}
	m.Sample(tr, init, rand.New(rand.NewPCG(seed, markovStream)))
	return tr, nil
}

// BirthDeathChain returns Lin et al.'s four-state birth–death transition matrix (Section IV)
//
//	[1−p−q  p+q    0      0    ]
//	[q      1−p−q  p      0    ]
//	[0      q      1−p−q  p    ]
//	[0      0      p+q    1−p−q]
//
// for p, q ≥ 0 with p + q ≤ 1 (every entry a probability); other values are an error.
func BirthDeathChain(p, q float64) ([][]float64, error) {
	if math.IsNaN(p) || math.IsNaN(q) || p < 0 || q < 0 || p+q > 1 {
		return nil, fmt.Errorf("datasets: birth–death chain: p = %v, q = %v, want p, q >= 0 and p + q <= 1", p, q)
	}
	s := 1 - p - q
	return [][]float64{
		{s, p + q, 0, 0},
		{q, s, p, 0},
		{0, q, s, p},
		{0, 0, p + q, s},
	}, nil
}

// ElectricityValues returns Lin et al.'s quantized half-hourly electricity use, the values of
// the four states of its chain: 20, 50, 100 and 200 Wh.
func ElectricityValues() []float64 { return []float64{20, 50, 100, 200} }

// ElectricityChain returns the generator of Lin et al.'s Section IV: BirthDeathChain(p, q) with
// the states valued by ElectricityValues.
func ElectricityChain(p, q float64) (*MarkovChain, error) {
	rows, err := BirthDeathChain(p, q)
	if err != nil {
		return nil, err
	}
	return NewMarkovChain(rows, ElectricityValues())
}

// ElectricityClient is one client of Lin et al.'s simulation: its chain parameters (p, q), the
// law Init of its data at collection time, and the number of samples it collects.
type ElectricityClient struct {
	P, Q    float64
	Init    []float64
	Samples int
}

// ElectricityClients returns the three clients of Lin et al.'s Section IV: (p, q) = (0.1, 0.2),
// (0.2, 0.1) and (0.4, 0.4); initial laws μ₁ = [0.8, 0.2, 0, 0], μ₂ = [0, 0.1, 0.5, 0.4] and
// μ₃ = [0.2, 0.3, 0.5, 0]; 100 samples each.
func ElectricityClients() []ElectricityClient {
	return []ElectricityClient{
		{P: 0.1, Q: 0.2, Init: []float64{0.8, 0.2, 0, 0}, Samples: 100},
		{P: 0.2, Q: 0.1, Init: []float64{0, 0.1, 0.5, 0.4}, Samples: 100},
		{P: 0.4, Q: 0.4, Init: []float64{0.2, 0.3, 0.5, 0}, Samples: 100},
	}
}
