package datasets

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// chiSquareRows returns Pearson's statistic Σ (O − E)²/E over the cells of positive
// probability of every row with visits, and its degrees of freedom Σ (cells − 1). A transition
// into a cell of probability 0 is reported as forbidden.
func chiSquareRows(t *testing.T, p [][]float64, counts [][]float64) (stat float64, dof int) {
	t.Helper()
	for x, row := range counts {
		total := 0.0
		for _, c := range row {
			total += c
		}
		if total == 0 {
			continue
		}
		cells := 0
		for y, c := range row {
			if p[x][y] == 0 {
				if c != 0 {
					t.Fatalf("transition %d → %d of probability 0 taken %g times", x, y, c)
				}
				continue
			}
			e := total * p[x][y]
			stat += (c - e) * (c - e) / e
			cells++
		}
		dof += cells - 1
	}
	return stat, dof
}

// TestMarkovTransitionFrequencies: the empirical transition counts of long samples match P by
// a chi-square test at level 1e-6 (fixed seeds, so the test is deterministic), for Lin et al.'s
// three chains and random chains on 6 and 12 states (the latter uses the binary-search path).
func TestMarkovTransitionFrequencies(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	random := func(n int) [][]float64 {
		p := make([][]float64, n)
		for x := range p {
			p[x] = make([]float64, n)
			s := 0.0
			for y := range p[x] {
				if rng.IntN(3) > 0 || y == x {
					p[x][y] = rng.Float64()
					s += p[x][y]
				}
			}
			for y := range p[x] {
				p[x][y] /= s
			}
		}
		return p
	}
	chains := map[string][][]float64{"random 6": random(6), "random 12": random(12)}
	for _, c := range ElectricityClients() {
		rows, err := BirthDeathChain(c.P, c.Q)
		if err != nil {
			t.Fatal(err)
		}
		chains[fmt.Sprintf("birth–death p=%g q=%g", c.P, c.Q)] = rows
	}
	for name, p := range chains {
		n := len(p)
		values := make([]float64, n)
		for i := range values {
			values[i] = float64(i)
		}
		m, err := NewMarkovChain(p, values)
		if err != nil {
			t.Fatal(err)
		}
		mu := make([]float64, n)
		for i := range mu {
			mu[i] = 1 / float64(n)
		}
		tr, err := m.Trajectories(4000, 50, mu, 7)
		if err != nil {
			t.Fatal(err)
		}
		counts := make([][]float64, n)
		for i := range counts {
			counts[i] = make([]float64, n)
		}
		for j := 0; j < tr.N; j++ {
			for s := 1; s < tr.Len; s++ {
				counts[tr.State(j, s-1)][tr.State(j, s)]++
			}
		}
		stat, dof := chiSquareRows(t, p, counts)
		crit := distuv.ChiSquared{K: float64(dof)}.Quantile(1 - 1e-6)
		if stat > crit {
			t.Errorf("%s: χ² = %.1f with %d dof, above the 1e-6 critical value %.1f", name, stat, dof, crit)
		}
		// A wrong matrix must fail the same test (the test can fail).
		q := make([][]float64, n)
		for x := range q {
			q[x] = slices.Clone(p[x])
		}
		for x := range q {
			// Move a quarter of the largest cell's mass to the smallest positive cell.
			hi, lo := 0, -1
			for y, v := range q[x] {
				if v > q[x][hi] {
					hi = y
				}
				if v > 0 && y != hi && (lo < 0 || v < q[x][lo]) {
					lo = y
				}
			}
			if lo >= 0 {
				d := q[x][hi] / 4
				q[x][hi] -= d
				q[x][lo] += d
			}
		}
		if bad, _ := chiSquareRows(t, q, counts); bad <= crit {
			t.Errorf("%s: perturbed matrix passes too (χ² %.1f ≤ %.1f)", name, bad, crit)
		}
	}
}

// TestMarkovInitialLaw: the states at time 0 follow μ (chi-square), zero-probability states
// never appear, and Lin et al.'s law μ₁ = [0.8, 0.2, 0, 0] is reproduced.
func TestMarkovInitialLaw(t *testing.T) {
	m, err := ElectricityChain(0.1, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	mu := ElectricityClients()[0].Init
	tr, err := m.Trajectories(200000, 0, mu, 3)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]float64, 4)
	for j := 0; j < tr.N; j++ {
		counts[tr.State(j, 0)]++
	}
	stat, dof := chiSquareRows(t, [][]float64{mu}, [][]float64{counts})
	if crit := (distuv.ChiSquared{K: float64(dof)}).Quantile(1 - 1e-6); stat > crit {
		t.Errorf("initial law: χ² = %.1f > %.1f, counts %v", stat, crit, counts)
	}
}

// TestMarkovMeanValue: the mean value of the data at time t is μPᵗ·values (exact law by
// matrix powers), within 5 standard errors.
func TestMarkovMeanValue(t *testing.T) {
	for i, c := range ElectricityClients() {
		m, err := ElectricityChain(c.P, c.Q)
		if err != nil {
			t.Fatal(err)
		}
		const n, steps = 20000, 12
		tr, err := m.Trajectories(n, steps, c.Init, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		law := slices.Clone(c.Init)
		p := m.Matrix()
		for s := 0; s <= steps; s++ {
			mean, sq := 0.0, 0.0
			for k, v := range law {
				mean += v * m.Value(k)
				sq += v * m.Value(k) * m.Value(k)
			}
			se := math.Sqrt((sq - mean*mean) / n)
			got := 0.0
			for j := 0; j < n; j++ {
				got += m.Value(tr.State(j, s))
			}
			got /= n
			if math.Abs(got-mean) > 5*se+1e-9 {
				t.Errorf("client %d, t = %d: mean %g, want %g (se %g)", i, s, got, mean, se)
			}
			next := make([]float64, len(law))
			for x, v := range law {
				for y := range next {
					next[y] += v * p[x][y]
				}
			}
			law = next
		}
	}
}

// TestMarkovReproducible: the same seed gives the same trajectories, another seed others; Sample
// reuses the buffer.
func TestMarkovReproducible(t *testing.T) {
	m, _ := ElectricityChain(0.4, 0.4)
	mu := ElectricityClients()[2].Init
	a, _ := m.Trajectories(100, 10, mu, 42)
	b, _ := m.Trajectories(100, 10, mu, 42)
	c, _ := m.Trajectories(100, 10, mu, 43)
	if !slices.Equal(a.States, b.States) {
		t.Error("same seed, different trajectories")
	}
	if slices.Equal(a.States, c.States) {
		t.Error("different seeds, same trajectories")
	}
	init, err := m.Initial(mu)
	if err != nil {
		t.Fatal(err)
	}
	tr := &Trajectories{N: 100, Len: 11, States: make([]int32, 0, 1100)}
	buf := &tr.States[:1][0]
	m.Sample(tr, init, rand.New(rand.NewPCG(42, markovStream)))
	if &tr.States[0] != buf {
		t.Error("Sample reallocated a buffer with enough room")
	}
	if !slices.Equal(tr.States, a.States) {
		t.Error("Sample with the same stream differs from Trajectories")
	}
}

// TestMarkovStepEdges: u = 0 and the largest u below 1 pick the first and the last state of
// positive probability; zero-probability states are never picked even at the edges.
func TestMarkovStepEdges(t *testing.T) {
	m, err := NewMarkovChain([][]float64{{0, 0.3, 0.7, 0}, {0.1, 0.2, 0.3, 0.4}, {1, 0, 0, 0}, {0, 0, 0, 1}}, []float64{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	below1 := math.Nextafter(1, 0)
	for _, tc := range []struct {
		x    int
		u    float64
		want int
	}{{0, 0, 1}, {0, below1, 2}, {0, 0.3, 2}, {0, 0.2999, 1}, {1, 0, 0}, {1, below1, 3}, {2, below1, 0}, {3, 0, 3}} {
		if got := m.Step(tc.x, tc.u); got != tc.want {
			t.Errorf("Step(%d, %v) = %d, want %d", tc.x, tc.u, got, tc.want)
		}
	}
	// A 12-state row with zeros around, through the binary search.
	row := make([]float64, 12)
	row[3], row[7] = 0.5, 0.5
	rows := make([][]float64, 12)
	for i := range rows {
		rows[i] = row
	}
	big, err := NewMarkovChain(rows, make([]float64, 12))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		u    float64
		want int
	}{{0, 3}, {0.49, 3}, {0.5, 7}, {below1, 7}} {
		if got := big.Step(0, tc.u); got != tc.want {
			t.Errorf("12 states: Step(0, %v) = %d, want %d", tc.u, got, tc.want)
		}
	}
}

func TestBirthDeathPreset(t *testing.T) {
	rows, err := BirthDeathChain(0.1, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float64{{0.7, 0.3, 0, 0}, {0.2, 0.7, 0.1, 0}, {0, 0.2, 0.7, 0.1}, {0, 0, 0.3, 0.7}}
	for x := range want {
		for y := range want[x] {
			if math.Abs(rows[x][y]-want[x][y]) > 1e-15 {
				t.Fatalf("row %d: %v, want %v", x, rows[x], want[x])
			}
		}
	}
	if v := ElectricityValues(); !slices.Equal(v, []float64{20, 50, 100, 200}) {
		t.Errorf("values %v", v)
	}
	cs := ElectricityClients()
	if len(cs) != 3 || cs[1].P != 0.2 || cs[2].Q != 0.4 || cs[1].Init[3] != 0.4 || cs[0].Samples != 100 {
		t.Errorf("clients %+v", cs)
	}
}

func TestMarkovErrors(t *testing.T) {
	ok := [][]float64{{0.5, 0.5}, {0.5, 0.5}}
	m, _ := NewMarkovChain(ok, []float64{1, 2})
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"empty":     {func() error { _, err := NewMarkovChain(nil, nil); return err }(), "no rows"},
		"values":    {func() error { _, err := NewMarkovChain(ok, []float64{1}); return err }(), "1 state values for 2 states"},
		"NaN value": {func() error { _, err := NewMarkovChain(ok, []float64{1, math.NaN()}); return err }(), "value of state 1"},
		"square":    {func() error { _, err := NewMarkovChain([][]float64{{1, 0}, {1}}, []float64{1, 2}); return err }(), "row 1 has 1 entries"},
		"negative":  {func() error { _, err := NewMarkovChain([][]float64{{1.2, -0.2}, {0, 1}}, []float64{1, 2}); return err }(), "entry (0, 1) = -0.2"},
		"row sum": {func() error {
			_, err := NewMarkovChain([][]float64{{0.5, 0.5}, {0.5, 0.4}}, []float64{1, 2})
			return err
		}(), "row 1 sums to 0.9"},
		"init len": {func() error { _, err := m.Trajectories(1, 1, []float64{1}, 0); return err }(), "initial law has 1 entries"},
		"init sum": {func() error { _, err := m.Trajectories(1, 1, []float64{0.5, 0.6}, 0); return err }(), "initial law sums to 1.1"},
		"init neg": {func() error { _, err := m.Trajectories(1, 1, []float64{1.5, -0.5}, 0); return err }(), "initial law entry 1 = -0.5"},
		"n":        {func() error { _, err := m.Trajectories(0, 1, []float64{1, 0}, 0); return err }(), "n = 0"},
		"steps":    {func() error { _, err := m.Trajectories(1, -1, []float64{1, 0}, 0); return err }(), "steps = -1"},
		"p+q":      {func() error { _, err := BirthDeathChain(0.6, 0.5); return err }(), "p + q <= 1"},
		"p<0":      {func() error { _, err := ElectricityChain(-0.1, 0.5); return err }(), "p = -0.1"},
		"too many": {func() error { _, err := m.Trajectories(1<<30, 10, []float64{1, 0}, 0); return err }(), "at most 2^31"},
		"q NaN":    {func() error { _, err := BirthDeathChain(0.1, math.NaN()); return err }(), "q = NaN"},
		"init NaN": {func() error { _, err := m.Initial([]float64{math.NaN(), 1}); return err }(), "entry 0 = NaN"},
		"init Inf": {func() error { _, err := m.Initial([]float64{math.Inf(1), 1}); return err }(), "entry 0 = +Inf"},
		"matrix Inf": {func() error {
			_, err := NewMarkovChain([][]float64{{math.Inf(1), 0}, {0, 1}}, []float64{1, 2})
			return err
		}(), "(0, 0) = +Inf"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %q", name, tc.err, tc.want)
		}
	}
}

func BenchmarkMarkovSample(b *testing.B) {
	m, _ := ElectricityChain(0.1, 0.2)
	init, _ := m.Initial(ElectricityClients()[0].Init)
	tr := &Trajectories{N: 100, Len: 16}
	rng := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		m.Sample(tr, init, rng)
	}
	b.ReportMetric(float64(b.N*tr.N*tr.Len)/b.Elapsed().Seconds()/1e6, "Mstates/s")
}
