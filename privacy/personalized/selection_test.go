package personalized

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
	"gonum.org/v1/gonum/mathext"
	"gonum.org/v1/gonum/stat/distuv"
)

// bigPMF returns P(X = j), j = 0..n, for X ~ Binomial(n, q) in 256-bit
// arithmetic: C(n, j) exactly (math/big), q exactly as its float64 value.
func bigPMF(n int, q float64) []*big.Float {
	const prec = 256
	one := big.NewFloat(1).SetPrec(prec)
	bq := new(big.Float).SetPrec(prec).SetFloat64(q)
	bp := new(big.Float).SetPrec(prec).Sub(one, bq)
	pq := make([]*big.Float, n+1)
	pp := make([]*big.Float, n+1)
	pq[0], pp[0] = one, one
	for i := 1; i <= n; i++ {
		pq[i] = new(big.Float).SetPrec(prec).Mul(pq[i-1], bq)
		pp[i] = new(big.Float).SetPrec(prec).Mul(pp[i-1], bp)
	}
	pmf := make([]*big.Float, n+1)
	c := big.NewInt(1)
	for j := 0; j <= n; j++ {
		if j > 0 {
			c.Mul(c, big.NewInt(int64(n-j+1)))
			c.Quo(c, big.NewInt(int64(j)))
		}
		v := new(big.Float).SetPrec(prec).SetInt(c)
		v.Mul(v, pq[j])
		pmf[j] = v.Mul(v, pp[n-j])
	}
	return pmf
}

// bigLog returns ln x for a positive big.Float, accurate to float64 even
// far below the float64 range.
func bigLog(x *big.Float) float64 {
	m := new(big.Float)
	e := x.MantExp(m)
	f, _ := m.Float64()
	return math.Log(f) + float64(e)*math.Ln2
}

// bruteQuantile returns the smallest r with P(X > r) ≤ delta, by the exact
// tail sums of pmf, and whether P(X > r) is within 1e−9 relative of delta
// (a near-tie, which SelectionBound resolves upwards).
func bruteQuantile(pmf []*big.Float, delta float64) (int, bool) {
	n := len(pmf) - 1
	bd := new(big.Float).SetFloat64(delta)
	near := new(big.Float).SetFloat64(delta * (1 - 1e-9))
	tail := new(big.Float).SetPrec(256) // P(X > r), r from n down
	prev := new(big.Float).SetPrec(256)
	for r := n; r >= 0; r-- {
		if tail.Cmp(bd) > 0 {
			return r + 1, prev.Cmp(near) >= 0
		}
		prev.Set(tail)
		tail.Add(tail, pmf[r])
	}
	return 0, prev.Cmp(near) >= 0
}

// TestLogBinomPMFExact: Loader's pmf against exact 256-bit values, to 1e-13
// relative, across the whole support including tails far below 1e-300.
func TestLogBinomPMFExact(t *testing.T) {
	for _, n := range []int{1, 2, 7, 16, 17, 40, 300, 2000} {
		for _, q := range []float64{1e-6, 0.001, 0.03, 0.3, 0.5, 0.77, 0.999} {
			pmf := bigPMF(n, q)
			for x := 0; x <= n; x++ {
				if pmf[x].Sign() == 0 {
					continue
				}
				want := bigLog(pmf[x])
				got := logBinomPMF(n, x, q)
				// Relative pmf error ≤ 1e−14·max(1, |ln pmf|): the precision
				// a float64 logarithm of that size has.
				if math.Abs(got-want) > 1e-14*math.Max(1, math.Abs(want)) {
					t.Fatalf("n=%d q=%g x=%d: ln pmf = %.16g, exact %.16g", n, q, x, got, want)
				}
			}
		}
	}
}

// TestLogBinomPMFSumsToOne: at T = 10⁶ and 10⁷, where ln C(n, x) through
// ln Γ would lose ~1e-8, the pmf sums to 1 within 1e-12 (the terms are
// summed over mean ± 40 standard deviations; the rest is below 1e-300).
func TestLogBinomPMFSumsToOne(t *testing.T) {
	for _, c := range []struct {
		n int
		q float64
	}{{1_000_000, 0.3}, {10_000_000, 1e-4}, {10_000_000, 0.5}} {
		if testing.Short() && c.n > 1_000_000 {
			continue
		}
		m, sd := float64(c.n)*c.q, math.Sqrt(float64(c.n)*c.q*(1-c.q))
		lo, hi := max(0, int(m-40*sd)), min(c.n, int(m+40*sd))
		var s, comp float64 // Kahan sum
		for x := lo; x <= hi; x++ {
			y := math.Exp(logBinomPMF(c.n, x, c.q)) - comp
			u := s + y
			comp = (u - s) - y
			s = u
		}
		if math.Abs(s-1) > 1e-12 {
			t.Errorf("n=%d q=%g: Σ pmf = %.16g", c.n, c.q, s)
		}
	}
}

// TestExactQuantileBruteForce: the exact quantile equals the smallest r
// whose exact tail P(X > r) is ≤ δ, for T up to 1000 (or the next one up
// where that tail equals δ to 1e−9, e.g. T = 3, q = 0.5, δ = 0.5).
func TestExactQuantileBruteForce(t *testing.T) {
	deltas := []float64{0.5, 0.2, 0.1, 0.01, 1e-3, 1e-5, 1e-9, 1e-15, 1e-40}
	for _, n := range []int{1, 2, 3, 5, 10, 30, 100, 301, 1000} {
		for _, q := range []float64{1e-4, 0.003, 0.01, 0.1, 0.37, 0.5, 0.9, 0.999} {
			pmf := bigPMF(n, q)
			for _, d := range deltas {
				want, tie := bruteQuantile(pmf, d)
				rb, err := SelectionBound(n, q, d, 0)
				if err != nil {
					t.Fatal(err)
				}
				if rb.Exact != want && !(tie && rb.Exact == want+1) {
					t.Errorf("T=%d q=%g δ=%g: exact quantile %d, brute force %d", n, q, d, rb.Exact, want)
				}
				if rb.Used < rb.Exact || rb.Used > n {
					t.Errorf("T=%d q=%g δ=%g: used %d outside [exact %d, T]", n, q, d, rb.Used, rb.Exact)
				}
			}
		}
	}
}

// TestExactQuantileRegIncBeta: for T = 10⁵..10⁷ the quantile is checked with
// gonum's regularized incomplete beta, P(X > r) = I_q(r+1, T−r): the tail at
// the returned r is ≤ δ and at r − 1 above δ, with a tolerance for
// RegIncBeta's own error (measured at a few 1e-12 here for T = 3000, larger
// for large T).
func TestExactQuantileRegIncBeta(t *testing.T) {
	for _, n := range []int{100_000, 1_000_000, 10_000_000} {
		for _, q := range []float64{1e-5, 0.001, 0.2, 0.5} {
			for _, d := range []float64{0.05, 1e-5, 1e-12} {
				rb, err := SelectionBound(n, q, d, 0)
				if err != nil {
					t.Fatal(err)
				}
				r := rb.Exact
				at := mathext.RegIncBeta(float64(r+1), float64(n-r), q)
				below := 1.0
				if r > 0 {
					below = mathext.RegIncBeta(float64(r), float64(n-r+1), q)
				}
				if at > d*(1+1e-6) || below < d*(1-1e-6) {
					t.Errorf("T=%d q=%g δ=%g: r=%d: P(X>r) = %.6g, P(X>r−1) = %.6g", n, q, d, r, at, below)
				}
			}
		}
	}
}

// TestLogisticHand: Lemma 1's logistic bound against a worked example.
// T = 1000, q = 0.01, δ‴ = 1e−5, k = 1.702:
// R = 10 + ln(99999)·√9.9/1.702 = 10 + 11.5129155·3.1464265/1.702 = 31.2835152
// (50-digit arithmetic: 31.283515172461767). The exact quantile of
// Binomial(1000, 0.01): P(X > 25) = 1.5587e−5 > 1e−5 ≥ P(X > 26) = 5.5705e−6
// (50-digit sums), so it is 26, and Used = ⌈31.28⌉ = 32.
func TestLogisticHand(t *testing.T) {
	rb, err := SelectionBound(1000, 0.01, 1e-5, 1.702)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(rb.Logistic-31.283515172461767) > 1e-12 || rb.Exact != 26 || rb.Used != 32 {
		t.Errorf("got %+v, want {31.283515172461767 26 32}", rb)
	}
	// The same formula by a different path: normal-approximation form with
	// the logit of 1 − δ.
	for _, c := range []struct {
		n       int
		q, d, k float64
	}{{1000, 0.01, 1e-5, 1.702}, {50, 0.2, 0.05, 1.6}, {10_000, 0.001, 1e-9, 1.702}, {7, 0.9, 0.3, 2}} {
		rb, err := SelectionBound(c.n, c.q, c.d, c.k)
		if err != nil {
			t.Fatal(err)
		}
		mean := float64(c.n) * c.q
		sd := math.Sqrt(mean * (1 - c.q))
		// Φ(x) = 1/(1+e^{−kx}) = 1 − δ ⇔ x = ln((1−δ)/δ)/k.
		want := mean + sd*math.Log((1-c.d)/c.d)/c.k
		if math.Abs(rb.Logistic-want) > 1e-10*math.Max(1, want) {
			t.Errorf("%+v: logistic %.15g, want %.15g", c, rb.Logistic, want)
		}
	}
	// k = 0 means 1.702.
	rb0, _ := SelectionBound(1000, 0.01, 1e-5, 0)
	if rb0 != rb {
		t.Errorf("k = 0 gives %+v, k = 1.702 gives %+v", rb0, rb)
	}
}

// TestSelectionBoundEdges: q = 1 gives T; the bound never exceeds T (the
// logistic expression may); δ‴ close to 1 can give 0.
func TestSelectionBoundEdges(t *testing.T) {
	for _, n := range []int{1, 5, 1000} {
		rb, err := SelectionBound(n, 1, 1e-5, 0)
		if err != nil || rb.Exact != n || rb.Used != n || rb.Logistic != float64(n) {
			t.Errorf("q=1 T=%d: %+v %v", n, rb, err)
		}
	}
	rb, _ := SelectionBound(10, 0.9, 1e-5, 0)
	if !(rb.Logistic > 10) || rb.Used != 10 || rb.Exact != 10 {
		t.Errorf("T=10 q=0.9: %+v: want logistic > 10, used = exact = 10", rb)
	}
	rb, _ = SelectionBound(1, 0.01, 0.9, 0)
	if rb.Exact != 0 || rb.Used != 0 || !(rb.Logistic < 0) {
		t.Errorf("T=1 q=0.01 δ=0.9: %+v: want 0, 0 and a negative logistic value", rb)
	}
}

// TestSelectionBoundMonotone: the bound does not decrease with T or q, and
// does not increase with δ‴.
func TestSelectionBoundMonotone(t *testing.T) {
	prev := 0
	for n := 1; n <= 3000; n += 37 {
		rb, _ := SelectionBound(n, 0.02, 1e-4, 0)
		if rb.Used < prev || rb.Exact > rb.Used {
			t.Fatalf("T=%d: %+v after %d", n, rb, prev)
		}
		prev = rb.Used
	}
	prev = 1 << 30
	for _, d := range []float64{1e-12, 1e-9, 1e-6, 1e-3, 0.01, 0.1, 0.4} {
		rb, _ := SelectionBound(500, 0.05, d, 0)
		if rb.Used > prev {
			t.Fatalf("δ=%g: %d after %d", d, rb.Used, prev)
		}
		prev = rb.Used
	}
	prev = 0
	for _, q := range []float64{1e-4, 1e-3, 0.01, 0.1, 0.5, 0.9, 1} {
		rb, _ := SelectionBound(500, q, 1e-6, 0)
		if rb.Exact < prev {
			t.Fatalf("q=%g: exact %d after %d", q, rb.Exact, prev)
		}
		prev = rb.Exact
	}
}

// simulateCounts runs the federated sampler trials times: T draws, each
// selecting client i with probability q[i] (q sums to 1), and returns for
// every client how often its count exceeded each threshold in thr[i].
func simulateCounts(rng *rand.Rand, q []float64, draws, trials int, thr [][]int) [][]int {
	cum := make([]float64, len(q))
	s := 0.0
	for i, v := range q {
		s += v
		cum[i] = s
	}
	cum[len(q)-1] = 1
	exceed := make([][]int, len(q))
	for i := range exceed {
		exceed[i] = make([]int, len(thr[i]))
	}
	counts := make([]int, len(q))
	for range trials {
		clear(counts)
		for range draws {
			u := rng.Float64()
			i := 0
			for u >= cum[i] {
				i++
			}
			counts[i]++
		}
		for i, c := range counts {
			for j, r := range thr[i] {
				if c > r {
					exceed[i][j]++
				}
			}
		}
	}
	return exceed
}

// TestSelectionBoundMonteCarlo simulates the sampler (T draws, client i
// chosen with probability qᵢ) and checks, for every client, that the count
// exceeds Rᵢ (Used) with frequency ≤ δ‴ + 4 binomial standard errors, and
// that R − 1 for the exact quantile is exceeded with frequency ≥ δ‴ − 4 s.e.
// (the exact quantile is the smallest that works). It also shows the
// logistic bound alone undershooting: client 0 (T·q = 0.03, δ‴ = 1.5e−4) has
// ⌈logistic⌉ = ⌈0.9256⌉ = 1 while P(C > 1) = 4.27e−4 (50-digit value) ≈ 2.8·δ‴.
func TestSelectionBoundMonteCarlo(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	cases := []struct {
		draws, trials int
		q, delta      []float64
	}{
		{30, 400_000, []float64{0.001, 0.05, 0.2, 0.749}, []float64{1.5e-4, 0.01, 0.05, 0.02}},
		{400, 20_000, []float64{0.004, 0.01, 0.1, 0.886}, []float64{0.01, 0.05, 0.02, 0.1}},
	}
	if testing.Short() {
		cases[0].trials, cases[1].trials = 100_000, 5_000
	}
	for ci, c := range cases {
		thr := make([][]int, len(c.q))
		bounds := make([]RoundsBound, len(c.q))
		for i := range c.q {
			rb, err := SelectionBound(c.draws, c.q[i], c.delta[i], 0)
			if err != nil {
				t.Fatal(err)
			}
			bounds[i] = rb
			thr[i] = []int{rb.Used, rb.Exact, rb.Exact - 1, int(math.Ceil(rb.Logistic))}
		}
		ex := simulateCounts(rng, c.q, c.draws, c.trials, thr)
		n := float64(c.trials)
		for i, d := range c.delta {
			se := math.Sqrt(d * (1 - d) / n)
			fUsed, fExact, fBelow := float64(ex[i][0])/n, float64(ex[i][1])/n, float64(ex[i][2])/n
			if fUsed > d+4*se || fExact > d+4*se {
				t.Errorf("case %d client %d (q=%g, %+v): P(C > used) ≈ %g, P(C > exact) ≈ %g > δ‴ = %g + 4·%.2g",
					ci, i, c.q[i], bounds[i], fUsed, fExact, d, se)
			}
			if bounds[i].Exact > 0 && fBelow < d-4*se {
				t.Errorf("case %d client %d (q=%g): P(C > exact−1) ≈ %g < δ‴ = %g − 4·%.2g: exact not minimal?", ci, i, c.q[i], fBelow, d, se)
			}
		}
	}
	// The undershoot of the logistic bound (case 0, client 0).
	b := bounds0(t)
	if !(math.Ceil(b.Logistic) < float64(b.Exact)) {
		t.Fatalf("client 0: %+v: want ⌈logistic⌉ below the exact quantile", b)
	}
}

// bounds0 is client 0 of TestSelectionBoundMonteCarlo's first case.
func bounds0(t *testing.T) RoundsBound {
	rb, err := SelectionBound(30, 0.001, 1.5e-4, 0)
	if err != nil {
		t.Fatal(err)
	}
	return rb
}

// TestLogisticUndershootMonteCarlo: with the logistic bound alone the
// guarantee breaks: T = 30 draws, q = 0.001, δ‴ = 1.5e−4: the count exceeds
// ⌈0.9256⌉ = 1 with frequency ≈ 4.27e−4, far above δ‴ (by more than 4
// standard errors), while the exact quantile 2 holds (P(C > 2) = 3.98e−6).
func TestLogisticUndershootMonteCarlo(t *testing.T) {
	rb := bounds0(t)
	if math.Abs(rb.Logistic-0.92557017986148045) > 1e-12 || rb.Exact != 2 || rb.Used != 2 {
		t.Fatalf("got %+v, want logistic 0.92557017986148, exact 2, used 2", rb)
	}
	const d = 1.5e-4
	trials := 1_000_000
	if testing.Short() {
		trials = 300_000
	}
	// Only client 0's count matters: one Bernoulli(q) per draw.
	rng := rand.New(rand.NewPCG(9, 9))
	over := 0
	for range trials {
		c := 0
		for range 30 {
			if rng.Float64() < 0.001 {
				c++
			}
		}
		if c > 1 {
			over++
		}
	}
	f := float64(over) / float64(trials)
	se := math.Sqrt(d * (1 - d) / float64(trials))
	if !(f > d+4*se) {
		t.Errorf("P(C > ⌈logistic⌉) ≈ %g: want above δ‴ = %g + 4·%.2g (logistic bound undershoots)", f, d, se)
	}
	// And the frequency agrees with the exact binomial tail.
	want := 1 - distuv.Binomial{N: 30, P: 0.001}.CDF(1)
	if se2 := math.Sqrt(want / float64(trials)); math.Abs(f-want) > 5*se2 {
		t.Errorf("P(C > 1) ≈ %g, binomial %g", f, want)
	}
}

// TestSelectionBoundErrors: every argument out of range is an error naming it.
func TestSelectionBoundErrors(t *testing.T) {
	for _, c := range []struct {
		n       int
		q, d, k float64
	}{
		{0, 0.1, 0.1, 0}, {-3, 0.1, 0.1, 0}, {MaxDraws + 1, 0.1, 0.1, 0},
		{10, 0, 0.1, 0}, {10, 1.5, 0.1, 0}, {10, math.NaN(), 0.1, 0},
		{10, 0.1, 0, 0}, {10, 0.1, 1, 0}, {10, 0.1, math.NaN(), 0},
		{10, 0.1, 0.1, -1}, {10, 0.1, 0.1, math.Inf(1)}, {10, 0.1, 0.1, math.NaN()},
	} {
		if _, err := SelectionBound(c.n, c.q, c.d, c.k); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("%+v: err = %v, want ErrInvalidArgument", c, err)
		}
	}
}
