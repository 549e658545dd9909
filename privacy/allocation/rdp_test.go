package allocation

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpsgd/dpsgd/privacy"
)

// rdpPartitionOracle is an independent oracle: the partition formula of
// rdpRemoveAll summed over an explicit enumeration of the
// partitions of α with at most M parts (feasible for small α).
func rdpPartitionOracle(sigma float64, m, alpha int) float64 {
	lf := func(n int) float64 { v, _ := math.Lgamma(float64(n + 1)); return v }
	var terms []float64
	var rec func(rem, maxPart int, parts []int)
	rec = func(rem, maxPart int, parts []int) {
		if rem == 0 {
			l := len(parts)
			if l > m {
				return
			}
			x := lf(alpha) - float64(alpha)*math.Log(float64(m))
			for i := 0; i < l; i++ {
				x += math.Log(float64(m - i))
			}
			mult := map[int]int{}
			for _, p := range parts {
				x += -lf(p) + float64(p*(p-1))/(2*sigma*sigma)
				mult[p]++
			}
			for _, c := range mult {
				x -= lf(c)
			}
			terms = append(terms, x)
			return
		}
		for p := min(rem, maxPart); p >= 1; p-- {
			rec(rem-p, p, append(parts, p))
		}
	}
	rec(alpha, alpha, nil)
	mx := math.Inf(-1)
	for _, x := range terms {
		mx = math.Max(mx, x)
	}
	s := 0.0
	for _, x := range terms {
		s += math.Exp(x - mx)
	}
	return (mx + math.Log(s)) / float64(alpha-1)
}

// TestRDPRemovePartitions compares the positive-series evaluation with the
// explicit partition sum.
func TestRDPRemovePartitions(t *testing.T) {
	orders := []float64{2, 3, 4, 5, 7, 10, 14}
	for _, c := range []struct {
		sigma float64
		m     int
	}{{1, 1}, {1, 2}, {0.8, 3}, {2, 5}, {1, 50}, {0.6, 13}, {3, 1000}} {
		got, err := RDPRemove(c.sigma, c.m, orders)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range orders {
			want := rdpPartitionOracle(c.sigma, c.m, int(a))
			// The oracle loses ~1e-13 absolute to cancellation when E L^α ≈ 1.
			if math.Abs(got[i]-want) > 1e-9*math.Max(want, 1e-3) {
				t.Errorf("σ = %g, M = %d, α = %g: %.15g, partitions %.15g", c.sigma, c.m, a, got[i], want)
			}
		}
	}
}

// TestRDPIdentities: α = 2 is ln(1 + b/M); M = 1 is α/(2σ²) both ways;
// large M tends to αb/(2M) in both directions (the add bound from above).
func TestRDPIdentities(t *testing.T) {
	orders := DefaultRDPOrders()
	for _, sigma := range []float64{0.3, 0.7, 1, 4, 50} {
		for _, m := range []int{1, 2, 10, 1000, 1e7} {
			r, err := RDPRemove(sigma, m, orders)
			if err != nil {
				t.Fatal(err)
			}
			want := math.Log1p(math.Expm1(1/(sigma*sigma)) / float64(m))
			if !cfRelClose(r[0], want, 1e-10) {
				t.Errorf("σ = %g, M = %d: D₂ = %.15g, want %.15g", sigma, m, r[0], want)
			}
			for i := range r {
				if !(r[i] >= 0) || math.IsInf(r[i], 0) || (i > 0 && r[i] < r[i-1]*(1-1e-12)) {
					t.Errorf("σ = %g, M = %d: D_%g = %g (previous %g): not finite/non-decreasing", sigma, m, orders[i], r[i], r[i-1])
				}
			}
		}
		for _, f := range []func(float64, int, []float64) ([]float64, error){RDPRemove, RDPAdd, RDP} {
			r, _ := f(sigma, 1, orders)
			for i, a := range orders {
				if !cfRelClose(r[i], a/(2*sigma*sigma), 1e-12) {
					t.Errorf("M = 1, σ = %g, α = %g: %g, want α/(2σ²)", sigma, a, r[i])
				}
			}
		}
	}
	sigma, m := 2.0, 100000
	b := math.Expm1(1 / (sigma * sigma))
	rem, _ := RDPRemove(sigma, m, []float64{2, 8, 32})
	add, _ := RDPAdd(sigma, m, []float64{2, 8, 32})
	for i, a := range []float64{2, 8, 32} {
		lead := a * b / (2 * float64(m))
		if !cfRelClose(rem[i], lead, 0.02) || add[i] < rem[i]*0.98 || !cfRelClose(add[i], lead, 0.25) {
			t.Errorf("α = %g: remove %g, add %g, leading αb/(2M) = %g", a, rem[i], add[i], lead)
		}
	}
}

// TestRDPMonteCarlo estimates E_P[L^α] and E_P[L^{1−α}] by simulation for
// small M: the remove direction must match, the add bound must not be below
// the estimate (5 standard errors of margin).
func TestRDPMonteCarlo(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 1))
	const n = 400000
	for _, c := range []struct {
		sigma float64
		m     int
	}{{2, 2}, {2, 3}, {1.5, 5}} {
		orders := []float64{2, 3, 4}
		rem, _ := RDPRemove(c.sigma, c.m, orders)
		add, _ := RDPAdd(c.sigma, c.m, orders)
		tt := 1 / c.sigma
		var sp, sp2, sn, sn2 [3]float64
		for k := 0; k < n; k++ {
			l := 0.0
			for j := 0; j < c.m; j++ {
				l += math.Exp(tt*rng.NormFloat64() - tt*tt/2)
			}
			l /= float64(c.m)
			for i, a := range orders {
				p, q := math.Pow(l, a), math.Pow(l, 1-a)
				sp[i] += p
				sp2[i] += p * p
				sn[i] += q
				sn2[i] += q * q
			}
		}
		for i, a := range orders {
			mp, mn := sp[i]/n, sn[i]/n
			sep := math.Sqrt((sp2[i]/n - mp*mp) / n)
			sen := math.Sqrt((sn2[i]/n - mn*mn) / n)
			wantRem := math.Exp((a - 1) * rem[i])
			if math.Abs(mp-wantRem) > 5*sep {
				t.Errorf("%+v α = %g: E L^α = %g ± %g (MC), formula %g", c, a, mp, sep, wantRem)
			}
			if bound := math.Exp((a - 1) * add[i]); mn > bound+5*sen {
				t.Errorf("%+v α = %g: E L^{1−α} = %g ± %g (MC) above the add bound %g", c, a, mn, sen, bound)
			}
		}
	}
}

// TestRDPEpsilonAboveLowerBounds: with M = 1 the pair is the Gaussian, so
// the RDP ε must not be below the exact Gaussian ε ((√E/σ)-GDP); and at a
// fixed number of epochs ε must not grow with M (amplification).
func TestRDPEpsilonAboveLowerBounds(t *testing.T) {
	for _, sigma := range []float64{0.8, 1, 2, 5} {
		for _, e := range []int{1, 4, 30} {
			a, err := NewRDPAccountant(sigma, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			eps, err := a.Epsilon(e, 1e-5)
			if err != nil {
				t.Fatal(err)
			}
			exact, _ := privacy.GaussianEpsilon(math.Sqrt(float64(e))/sigma, 1e-5)
			if eps < exact {
				t.Errorf("σ = %g, E = %d: RDP ε = %g below the exact Gaussian %g", sigma, e, eps, exact)
			}
			prev := eps
			for _, m := range []int{10, 100, 1000} {
				am, _ := NewRDPAccountant(sigma, m, nil)
				em, _ := am.Epsilon(e*m, 1e-5)
				if em > prev*(1+1e-12) {
					t.Errorf("σ = %g, E = %d: ε(M = %d) = %g > ε at smaller M %g", sigma, e, m, em, prev)
				}
				prev = em
			}
		}
	}
}

func TestRDPInvalid(t *testing.T) {
	for i, c := range []struct {
		sigma  float64
		m      int
		orders []float64
	}{{0, 10, []float64{2}}, {1, 0, []float64{2}}, {1, 10, nil}, {1, 10, []float64{1.5}}, {1, 10, []float64{2048}}, {1, 10, []float64{math.NaN()}}} {
		if _, err := RDP(c.sigma, c.m, c.orders); !errors.Is(err, privacy.ErrInvalidArgument) {
			t.Errorf("case %d: %v", i, err)
		}
	}
	// Tiny σ: +Inf per order (no privacy), never NaN; the accountant says unreachable.
	r, err := RDP(1e-200, 10, []float64{2, 3})
	if err != nil || !math.IsInf(r[0], 1) || !math.IsInf(r[1], 1) {
		t.Errorf("σ = 1e-200: %v %v", r, err)
	}
	a, _ := NewRDPAccountant(1e-200, 10, []float64{2, 3})
	if _, err := a.Epsilon(10, 1e-5); !errors.Is(err, privacy.ErrUnreachable) {
		t.Errorf("σ = 1e-200 ε: %v", err)
	}
	if d, err := a.Delta(10, 1); err != nil || d != 1 {
		t.Errorf("σ = 1e-200 δ = %g, %v; want 1", d, err)
	}
}
