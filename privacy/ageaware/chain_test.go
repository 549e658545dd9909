package ageaware

import (
	"errors"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
	"gonum.org/v1/gonum/mat"
)

// birthDeath is Lin et al.'s 4-state chain (Section IV).
func birthDeath(p, q float64) [][]float64 {
	return [][]float64{
		{1 - p - q, p + q, 0, 0},
		{q, 1 - p - q, p, 0},
		{0, q, 1 - p - q, p},
		{0, 0, p + q, 1 - p - q},
	}
}

// randomReversible returns P = D⁻¹W for a random symmetric W with positive
// entries where keep(x, y) holds (always on the diagonal and the path x, x+1
// so that P is irreducible), zero elsewhere.
func randomReversible(rng *rand.Rand, n int, density float64) [][]float64 {
	w := make([][]float64, n)
	for i := range w {
		w[i] = make([]float64, n)
	}
	for x := 0; x < n; x++ {
		for y := x; y < n; y++ {
			if y == x || y == x+1 || rng.Float64() < density {
				v := rng.ExpFloat64() + 1e-3
				w[x][y], w[y][x] = v, v
			}
		}
	}
	for x := range w {
		s := 0.0
		for _, v := range w[x] {
			s += v
		}
		for y := range w[x] {
			w[x][y] /= s
		}
	}
	return w
}

// metropolis returns the Metropolis chain on a ring of n states targeting the
// law target: propose x±1 with probability ½ each, accept min(1, π(y)/π(x)).
func metropolis(target []float64) [][]float64 {
	n := len(target)
	p := make([][]float64, n)
	for x := range p {
		p[x] = make([]float64, n)
		for _, y := range []int{(x + 1) % n, (x + n - 1) % n} {
			p[x][y] += 0.5 * math.Min(1, target[y]/target[x])
		}
		s := 0.0
		for y := range p[x] {
			if y != x {
				s += p[x][y]
			}
		}
		p[x][x] = 1 - s
	}
	return p
}

func mustChain(t testing.TB, rows [][]float64) *Chain {
	t.Helper()
	c, err := NewChain(rows)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// naiveDelta computes Δ(t) straight from the definition: the reverse chain's
// rows from Reverse and the half ℓ1 distance between every pair.
func naiveDelta(t *testing.T, c *Chain, age int) float64 {
	t.Helper()
	r, err := c.Reverse(age)
	if err != nil {
		t.Fatal(err)
	}
	best := 0.0
	for x := range r {
		for x2 := range r {
			best = math.Max(best, TV(r[x], r[x2]))
		}
	}
	return best
}

// TestStationaryAgainstEigenvector: GTH's π against gonum's left eigenvector of
// P for the eigenvalue 1 (a right eigenvector of Pᵀ), on random chains.
func TestStationaryAgainstEigenvector(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 50; trial++ {
		n := 2 + rng.IntN(7)
		rows := make([][]float64, n)
		for x := range rows {
			rows[x] = make([]float64, n)
			s := 0.0
			for y := range rows[x] {
				rows[x][y] = rng.Float64()
				s += rows[x][y]
			}
			for y := range rows[x] {
				rows[x][y] /= s
			}
		}
		c := mustChain(t, rows)
		pi := c.Stationary()
		pt := mat.NewDense(n, n, nil)
		for x := 0; x < n; x++ {
			for y := 0; y < n; y++ {
				pt.Set(y, x, rows[x][y])
			}
		}
		var eig mat.Eigen
		if !eig.Factorize(pt, mat.EigenRight) {
			t.Fatal("eigen failed")
		}
		vals := eig.Values(nil)
		var vecs mat.CDense
		eig.VectorsTo(&vecs)
		k := 0
		for i, v := range vals {
			if cmplx.Abs(v-1) < cmplx.Abs(vals[k]-1) {
				k = i
			}
		}
		ref := make([]float64, n)
		s := 0.0
		for i := range ref {
			ref[i] = real(vecs.At(i, k))
			s += ref[i]
		}
		for i := range ref {
			ref[i] /= s
			if math.Abs(ref[i]-pi[i]) > 1e-12 {
				t.Fatalf("trial %d: π[%d] = %.15g, eigenvector gives %.15g", trial, i, pi[i], ref[i])
			}
		}
		// πP = π.
		for y := 0; y < n; y++ {
			v := 0.0
			for x := 0; x < n; x++ {
				v += pi[x] * rows[x][y]
			}
			if math.Abs(v-pi[y]) > 1e-14 {
				t.Fatalf("(πP)[%d] = %g, π = %g", y, v, pi[y])
			}
		}
	}
}

// TestTwoStateClosedForm: for P = [[1−p, p], [q, 1−q]] the reverse chain is P
// itself and Δ(t) = |1 − p − q|ᵗ; the spectral bound is
// min{1, max(√(p/q), √(q/p))·|1 − p − q|ᵗ}. Also checks relative accuracy of
// tiny Δ (the deviation-matrix evaluation) at t = 300.
func TestTwoStateClosedForm(t *testing.T) {
	for _, pq := range [][2]float64{{0.1, 0.2}, {0.9, 0.7}, {0.5, 0.5}, {0.03, 0.6}, {1, 1}} {
		p, q := pq[0], pq[1]
		c := mustChain(t, [][]float64{{1 - p, p}, {q, 1 - q}})
		lam := math.Abs(1 - p - q)
		for _, age := range []int{0, 1, 2, 3, 7, 20, 300} {
			got, err := c.Delta(age)
			if err != nil {
				t.Fatal(err)
			}
			want := math.Pow(lam, float64(age))
			if math.Abs(got-want) > 1e-12*want+1e-300 {
				t.Errorf("p=%g q=%g: Δ(%d) = %.17g, want %.17g", p, q, age, got, want)
			}
			b, err := c.SpectralBound(age)
			if err != nil {
				t.Fatal(err)
			}
			wantB := math.Min(1, math.Max(math.Sqrt(p/q), math.Sqrt(q/p))*want)
			if math.Abs(b-wantB) > 1e-9*wantB+1e-300 {
				t.Errorf("p=%g q=%g: bound(%d) = %.17g, want %.17g", p, q, age, b, wantB)
			}
		}
	}
}

// TestDeltaBelowSpectralBound is the property test of the spectral bound: on random
// reversible chains (P = D⁻¹W with symmetric W, and Metropolis chains), the
// exact Δ(t) never exceeds the spectral bound; Δ(0) = 1; Δ is non-increasing;
// the fast evaluation matches the naive one from the reverse chain's rows.
func TestDeltaBelowSpectralBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(name string, c *Chain) {
		t.Helper()
		if !c.Reversible() {
			t.Fatalf("%s: not reversible", name)
		}
		const maxAge = 60
		d, err := c.DeltaCurve(maxAge)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.SpectralBoundCurve(maxAge)
		if err != nil {
			t.Fatal(err)
		}
		if d[0] != 1 {
			t.Errorf("%s: Δ(0) = %g, want 1", name, d[0])
		}
		for age := range d {
			if d[age] > b[age]*(1+1e-9)+1e-15 {
				t.Errorf("%s: Δ(%d) = %g above the spectral bound %g", name, age, d[age], b[age])
			}
			if age > 0 && d[age] > d[age-1]*(1+1e-9)+1e-15 {
				t.Errorf("%s: Δ(%d) = %g > Δ(%d) = %g", name, age, d[age], age-1, d[age-1])
			}
			if age <= 12 {
				if nv := naiveDelta(t, c, age); math.Abs(nv-d[age]) > 1e-12 {
					t.Errorf("%s: Δ(%d) = %.15g, naive %.15g", name, age, d[age], nv)
				}
				one, _ := c.Delta(age)
				if math.Abs(one-d[age]) > 1e-13*d[age]+1e-300 {
					t.Errorf("%s: Delta(%d) = %g, DeltaCurve %g", name, age, one, d[age])
				}
			}
		}
	}
	for trial := 0; trial < 200; trial++ {
		n := 2 + rng.IntN(9)
		check("W-chain", mustChain(t, randomReversible(rng, n, rng.Float64())))
	}
	for trial := 0; trial < 100; trial++ {
		n := 2 + rng.IntN(9)
		target := make([]float64, n)
		s := 0.0
		for i := range target {
			target[i] = rng.ExpFloat64() + 0.01
			s += target[i]
		}
		for i := range target {
			target[i] /= s
		}
		c := mustChain(t, metropolis(target))
		for i, v := range c.Stationary() {
			if math.Abs(v-target[i]) > 1e-12 {
				t.Fatalf("Metropolis π[%d] = %g, target %g", i, v, target[i])
			}
		}
		check("Metropolis", c)
	}
	for _, pq := range [][2]float64{{0.1, 0.2}, {0.2, 0.1}, {0.4, 0.4}} {
		check("Lin et al. birth–death", mustChain(t, birthDeath(pq[0], pq[1])))
	}
}

// TestEigenvaluesAgainstGeneralSolver: the symmetrized eigenvalues against
// gonum's general eigensolver on P itself.
func TestEigenvaluesAgainstGeneralSolver(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 50; trial++ {
		n := 2 + rng.IntN(8)
		rows := randomReversible(rng, n, 0.5)
		c := mustChain(t, rows)
		ev, err := c.Eigenvalues()
		if err != nil {
			t.Fatal(err)
		}
		var eig mat.Eigen
		flat := make([]float64, 0, n*n)
		for _, r := range rows {
			flat = append(flat, r...)
		}
		if !eig.Factorize(mat.NewDense(n, n, flat), mat.EigenNone) {
			t.Fatal("eigen failed")
		}
		ref := eig.Values(nil)
		for _, r := range ref {
			if math.Abs(imag(r)) > 1e-9 {
				t.Fatalf("reversible chain with complex eigenvalue %v", r)
			}
			best := math.Inf(1)
			for _, v := range ev {
				best = math.Min(best, math.Abs(v-real(r)))
			}
			if best > 1e-9 {
				t.Fatalf("eigenvalue %v of P not among %v", r, ev)
			}
		}
		if math.Abs(ev[0]-1) > 1e-12 {
			t.Fatalf("largest eigenvalue %g, want 1", ev[0])
		}
	}
}

// TestReverseChainMonteCarlo simulates the stationary chain and counts
// transitions backwards: the frequency of X_{k−t} = y among X_k = x estimates
// P̂_t(x, y). A non-reversible chain is used so that P̂ ≠ P.
func TestReverseChainMonteCarlo(t *testing.T) {
	rows := [][]float64{
		{0.1, 0.6, 0.3},
		{0.2, 0.1, 0.7},
		{0.5, 0.3, 0.2},
	}
	c := mustChain(t, rows)
	if c.Reversible() {
		t.Fatal("test chain should not be reversible")
	}
	const age, steps = 2, 2_000_000
	rng := rand.New(rand.NewPCG(7, 8))
	pi := c.Stationary()
	draw := func(law []float64) int {
		u := rng.Float64()
		for i, p := range law {
			if u < p {
				return i
			}
			u -= p
		}
		return len(law) - 1
	}
	path := make([]int, steps)
	path[0] = draw(pi)
	for k := 1; k < steps; k++ {
		path[k] = draw(rows[path[k-1]])
	}
	var counts [3][3]float64
	var totals [3]float64
	for k := age; k < steps; k++ {
		counts[path[k]][path[k-age]]++
		totals[path[k]]++
	}
	rev, err := c.Reverse(age)
	if err != nil {
		t.Fatal(err)
	}
	fwd, _ := c.Power(age)
	for x := 0; x < 3; x++ {
		sum := 0.0
		for y := 0; y < 3; y++ {
			sum += rev[x][y]
			est := counts[x][y] / totals[x]
			se := math.Sqrt(rev[x][y] * (1 - rev[x][y]) / totals[x])
			// Consecutive samples are dependent: allow 6 naive standard errors.
			if math.Abs(est-rev[x][y]) > 6*se+1e-4 {
				t.Errorf("P̂_%d(%d, %d) = %.4f, Monte Carlo %.4f (se %.4f)", age, x, y, rev[x][y], est, se)
			}
		}
		if math.Abs(sum-1) > 1e-12 {
			t.Errorf("reverse row %d sums to %g", x, sum)
		}
	}
	// The reverse chain differs from the forward one here.
	if math.Abs(rev[0][1]-fwd[0][1]) < 0.01 {
		t.Errorf("reverse %g ≈ forward %g: test is not discriminating", rev[0][1], fwd[0][1])
	}
	if _, err := c.SpectralBound(1); !errors.Is(err, privacy.ErrOutOfRegime) {
		t.Errorf("spectral bound of a non-reversible chain: err = %v, want ErrOutOfRegime", err)
	}
	if d, err := c.Delta(3); err != nil || !(d > 0 && d < 1) {
		t.Errorf("Delta of a non-reversible chain: %g, %v", d, err)
	}
}

// TestPosteriorDelta: with init = π it is the reverse chain's Δ; for another
// law it matches Bayes' rule evaluated naively from Pᵗ.
func TestPosteriorDelta(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for trial := 0; trial < 50; trial++ {
		n := 2 + rng.IntN(6)
		c := mustChain(t, randomReversible(rng, n, 0.3))
		for _, age := range []int{0, 1, 2, 5, 9} {
			d, _ := c.Delta(age)
			pd, err := c.PosteriorDelta(c.Stationary(), age)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(d-pd) > 1e-12 {
				t.Fatalf("age %d: Δ %g, posterior Δ with π %g", age, d, pd)
			}
			init := make([]float64, n)
			s := 0.0
			for i := range init {
				if rng.IntN(3) > 0 {
					init[i] = rng.Float64()
					s += init[i]
				}
			}
			if s == 0 {
				init[0], s = 1, 1
			}
			for i := range init {
				init[i] /= s
			}
			pt, _ := c.Power(age)
			var posts [][]float64
			for z := 0; z < n; z++ {
				nu := 0.0
				for x := 0; x < n; x++ {
					nu += init[x] * pt[x][z]
				}
				if nu == 0 {
					continue
				}
				post := make([]float64, n)
				for x := range post {
					post[x] = init[x] * pt[x][z] / nu
				}
				posts = append(posts, post)
			}
			want := 0.0
			for _, a := range posts {
				for _, b := range posts {
					want = math.Max(want, TV(a, b))
				}
			}
			got, err := c.PosteriorDelta(init, age)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-want) > 1e-12 {
				t.Fatalf("age %d init %v: posterior Δ %.15g, naive %.15g", age, init, got, want)
			}
		}
	}
	c := mustChain(t, birthDeath(0.1, 0.2))
	curve, err := c.PosteriorDeltaCurve([]float64{0.8, 0.2, 0, 0}, 5)
	if err != nil || len(curve) != 6 || curve[0] != 1 {
		t.Fatalf("curve %v, %v", curve, err)
	}
}

// TestChainErrors: every malformed matrix is refused with an error that wraps
// ErrInvalidArgument and names the row or entry.
func TestChainErrors(t *testing.T) {
	cases := []struct {
		name string
		rows [][]float64
		want string
	}{
		{"empty", nil, "no rows"},
		{"not square", [][]float64{{1, 0}, {1}}, "row 1 has 1 entries, want 2"},
		{"negative", [][]float64{{1.5, -0.5}, {0.5, 0.5}}, "entry (0, 1) = -0.5"},
		{"NaN", [][]float64{{0.5, 0.5}, {math.NaN(), 0.5}}, "entry (1, 0) = NaN"},
		{"Inf", [][]float64{{0.5, 0.5}, {0.5, math.Inf(1)}}, "entry (1, 1) = +Inf"},
		{"row sum", [][]float64{{0.5, 0.5}, {0.5, 0.6}}, "row 1 sums to 1.1"},
		{"reducible", [][]float64{{1, 0}, {0.5, 0.5}}, "reducible: state 0 cannot reach state 1"},
		{"absorbing", [][]float64{{0.5, 0.5, 0}, {0, 0.5, 0.5}, {0, 0, 1}}, "reducible: state 1 cannot reach state 0"},
	}
	for _, tc := range cases {
		_, err := NewChain(tc.rows)
		if !errors.Is(err, privacy.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument naming %q", tc.name, err, tc.want)
		}
	}
	c := mustChain(t, birthDeath(0.1, 0.2))
	for name, f := range map[string]func() error{
		"Delta":          func() error { _, err := c.Delta(-1); return err },
		"DeltaCurve":     func() error { _, err := c.DeltaCurve(-2); return err },
		"SpectralBound":  func() error { _, err := c.SpectralBound(-1); return err },
		"Reverse":        func() error { _, err := c.Reverse(-1); return err },
		"Power":          func() error { _, err := c.Power(-1); return err },
		"PosteriorDelta": func() error { _, err := c.PosteriorDelta([]float64{1, 0, 0, 0}, -1); return err },
		"init length":    func() error { _, err := c.PosteriorDelta([]float64{1, 0}, 1); return err },
		"init sum":       func() error { _, err := c.PosteriorDelta([]float64{0.5, 0, 0, 0}, 1); return err },
		"init negative":  func() error { _, err := c.PosteriorDelta([]float64{1.5, -0.5, 0, 0}, 1); return err },
	} {
		if err := f(); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", name, err)
		}
	}
	// Rows within the tolerance are accepted and rescaled.
	c = mustChain(t, [][]float64{{0.5 + 4e-10, 0.5}, {0.5, 0.5}})
	if s := c.At(0, 0) + c.At(0, 1); math.Abs(s-1) > 1e-15 {
		t.Errorf("row 0 sums to %.17g after rescaling", s)
	}
}

// TestSingleState: a one-state chain has Δ ≡ 0 and bound 0.
func TestSingleState(t *testing.T) {
	c := mustChain(t, [][]float64{{1}})
	for _, age := range []int{0, 1, 5} {
		d, _ := c.Delta(age)
		b, err := c.SpectralBound(age)
		if d != 0 || b != 0 || err != nil {
			t.Errorf("age %d: Δ %g bound %g err %v", age, d, b, err)
		}
	}
}

// TestPeriodicChain: a periodic chain never forgets (Δ ≡ 1, bound 1).
func TestPeriodicChain(t *testing.T) {
	c := mustChain(t, [][]float64{{0, 1}, {1, 0}})
	for _, age := range []int{0, 1, 2, 51} {
		d, _ := c.Delta(age)
		b, _ := c.SpectralBound(age)
		if math.Abs(d-1) > 1e-15 || b != 1 {
			t.Errorf("age %d: Δ %g bound %g, want 1 and 1", age, d, b)
		}
	}
}

// FuzzNewChain: any matrix built from the input is either refused with
// ErrInvalidArgument or gives a chain whose π is a law and whose Δ is in [0, 1].
func FuzzNewChain(f *testing.F) {
	f.Add([]byte{2, 10, 20, 30, 40})
	f.Add([]byte{3, 0, 0, 255, 1, 1, 1, 7, 7, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		n := int(b[0])%6 + 1
		rows := make([][]float64, n)
		k := 1
		for x := range rows {
			rows[x] = make([]float64, n)
			s := 0.0
			for y := range rows[x] {
				if k < len(b) {
					rows[x][y] = float64(b[k])
					k++
				}
				s += rows[x][y]
			}
			if s > 0 && (x+len(b))%5 != 0 { // some rows left unnormalized on purpose
				for y := range rows[x] {
					rows[x][y] /= s
				}
			}
		}
		c, err := NewChain(rows)
		if err != nil {
			if !errors.Is(err, privacy.ErrInvalidArgument) {
				t.Fatalf("error %v does not wrap ErrInvalidArgument", err)
			}
			return
		}
		s := 0.0
		for _, v := range c.Stationary() {
			if !(v > 0) {
				t.Fatalf("π has entry %g", v)
			}
			s += v
		}
		if math.Abs(s-1) > 1e-12 {
			t.Fatalf("π sums to %g", s)
		}
		for age := 0; age < 4; age++ {
			d, err := c.Delta(age)
			if err != nil || d < 0 || d > 1 {
				t.Fatalf("Δ(%d) = %g, %v", age, d, err)
			}
		}
	})
}
