package audit

import (
	"math"

	"github.com/dpsgd/dpsgd/engine/sampler"
	"github.com/dpsgd/dpsgd/internal/numeric"
)

// Adversarial canary designs: the canary's record sits at the edge of floating point, and
// every ordinary example is a·e_{D−1} with label 1, as in CanaryOpposed, so that each pushes
// the canary coordinates by −ρC and a step in which the engine drops ordinary examples
// shows as a missing shift. See the package documentation.
const (
	// CanaryNaN is the record NaN·e_{D−1}, label 1: its logits are NaN.
	CanaryNaN = "nan"
	// CanaryInf is the record −Inf·e_{D−1}, label 1: its class-0 logit is +Inf once the
	// ordinary examples have pushed W[D−1, 0] below 0 (NaN at θ₀ = 0).
	CanaryInf = "inf"
	// CanaryHugeLogit is the record −3.4028235e38·e_{D−1} (the largest float32), label
	// 1: its features are finite and its class-0 logit is about 1e34 once W[D−1, 0] < 0.
	CanaryHugeLogit = "huge-logit"
)

// Canary rows: where the adversarial canary sits in the engine's physical batches.
const (
	// RowFirst gives the canary the dataset's smallest index, 0: the Poisson samplers and
	// allocation return a batch in increasing index order, so whenever it is drawn the canary
	// is row 0 of the step's first physical batch.
	RowFirst = "first"
	// RowRandom gives the canary a uniform index, drawn afresh for every training from its
	// seed (public to the test, as the design is): its row is then the number of drawn
	// examples below it, and it is row 0 of a physical batch only when that number is a
	// multiple of the physical batch size. Shuffle batches are in permutation order, so
	// under shuffle the canary's row is uniform whatever its index, and this is the only
	// row shuffle takes.
	RowRandom = "random"
)

// Canaries lists every canary design Config.Canary takes.
func Canaries() []string {
	return []string{CanaryIsolated, CanaryOpposed, CanaryNaN, CanaryInf, CanaryHugeLogit}
}

// AdversarialCanaries lists the adversarial designs.
func AdversarialCanaries() []string { return []string{CanaryNaN, CanaryInf, CanaryHugeLogit} }

// IsAdversarial reports whether canary is one of the adversarial designs.
func IsAdversarial(canary string) bool {
	return canary == CanaryNaN || canary == CanaryInf || canary == CanaryHugeLogit
}

// CanaryRows lists the values of Config.CanaryRow.
func CanaryRows() []string { return []string{RowFirst, RowRandom} }

// MaxAdversarialN bounds N for the adversarial designs: their scores sum over the ordinary
// examples' batch counts (O(N) per Poisson step after O(N²) per canary index, O(M·N²) per
// allocation epoch).
const MaxAdversarialN = 1024

// maxAllocationWork bounds M·(N−1)², the cost of one allocation epoch's adversarial score.
const maxAllocationWork = 1 << 22

// canaryValue is the adversarial canary's value on the canary feature.
func canaryValue(canary string) float32 {
	switch canary {
	case CanaryNaN:
		return float32(math.NaN())
	case CanaryInf:
		return float32(math.Inf(-1))
	}
	return -math.MaxFloat32
}

// ownPush is the adversarial canary's own push on y in noise units when a correct engine
// includes it: 0 for NaN and ±Inf features (a non-finite gradient norm, clip coefficient 0),
// and ρ_c/σ with ρ_c = A/√(A²+1) = 1 in float64 for the huge-logit canary, whose finite
// gradient is clipped to C along (1, −1)/√2 in the canary coordinates whenever its
// class-0 probability is positive.
func ownPush(canary string, sigma float64) float64 {
	if canary != CanaryHugeLogit {
		return 0
	}
	a := float64(math.MaxFloat32)
	return a / math.Hypot(a, 1) / sigma
}

// erased is the number of ordinary rows that a canary at position kb of its sorted batch
// (kb examples before it) removes under the cross-row fault, with ka examples after it:
// when it is row 0 of a physical batch of phys rows, the other rows of that physical batch.
func erased(kb, ka, phys int) int {
	if kb%phys != 0 {
		return 0
	}
	return min(phys-1, ka)
}

// lnBinom returns ln of the Binomial(n, p) probability of k.
func lnBinom(k, n int, p float64) float64 {
	if k < 0 || k > n {
		return math.Inf(-1)
	}
	switch p {
	case 0:
		if k == 0 {
			return 0
		}
		return math.Inf(-1)
	case 1:
		if k == n {
			return 0
		}
		return math.Inf(-1)
	}
	return lnChoose(n, k) + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p)
}

// lnChoose returns ln C(n, k) for 0 ≤ k ≤ n.
func lnChoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// lseShift returns ln Σ_v exp(lw[v] − (y + s·v − c)²/2).
func lseShift(lw []float64, y, s, c float64) float64 {
	m := math.Inf(-1)
	for v, w := range lw {
		z := y + s*float64(v) - c
		if e := w - z*z/2; e > m {
			m = e
		}
	}
	if math.IsInf(m, -1) {
		return m
	}
	sum := 0.0
	for v, w := range lw {
		z := y + s*float64(v) - c
		sum += math.Exp(w - z*z/2 - m)
	}
	return m + math.Log(sum)
}

// poissonWeights are, for a canary at index j of N under Poisson sampling at rate q with
// physical batches of phys rows, the log-probabilities of the number of ordinary examples
// whose push the update shows: lw0[v] without the canary (Binomial(N−1, q)), and lw1[v]
// with the canary drawn and the cross-row fault (kb ~ Binomial(j, q) ordinary examples
// below it and ka ~ Binomial(N−1−j, q) above, erased(kb, ka, phys) of them removed).
type poissonWeights struct{ lw0, lw1 []float64 }

func newPoissonWeights(n, j, phys int, q float64) *poissonWeights {
	n1 := n - 1
	nb, na := j, n1-j
	w := &poissonWeights{lw0: make([]float64, n1+1), lw1: make([]float64, n1+1)}
	for v := range w.lw0 {
		w.lw0[v] = lnBinom(v, n1, q)
	}
	pb := make([]float64, nb+1)
	for k := range pb {
		pb[k] = math.Exp(lnBinom(k, nb, q))
	}
	pa := make([]float64, na+1)
	for k := range pa {
		pa[k] = math.Exp(lnBinom(k, na, q))
	}
	w1 := make([]float64, n1+1)
	for kb, p := range pb {
		if p == 0 {
			continue
		}
		for ka, r := range pa {
			w1[kb+ka-erased(kb, ka, phys)] += p * r
		}
	}
	for v, p := range w1 {
		w.lw1[v] = math.Log(p)
	}
	return w
}

// advPoissonLogLR is one Poisson step's log-likelihood ratio under the cross-row fault:
// ln(1 − q + q·g(y)/f(y)), f(y) = Σ_v P₀(v) φ(y + s v) and g(y) = Σ_v P₁(v) φ(y + s v − c),
// c the canary's own push.
func (d *design) advPoissonLogLR(y float64, w *poissonWeights) float64 {
	l0 := lseShift(w.lw0, y, d.s, 0)
	l1 := lseShift(w.lw1, y, d.s, d.own)
	return numeric.LogAddExp(math.Log1p(-d.q), math.Log(d.q)+l1-l0)
}

// advShuffleEpochLogLR is one shuffle epoch's log-likelihood ratio under the cross-row fault,
// from its observed steps ys (the first L of M). With y'_t = y_t + B·s (every step but the
// canary's holds B ordinary examples), the canary's slot is in step t with probability B/N
// and in the dropped remainder with probability (N − M·B)/N; without the canary its step
// shows +s, with it +s + c when the canary is not row 0 and B·s + c when it is (probability
// 1/B, the other B − 1 rows removed):
//
//	A₀ = r + (B/N) Σ_t e^{s y'_t − s²/2},
//	A₁ = r + (B/N) Σ_t [(1 − 1/B) e^{u y'_t − u²/2} + (1/B) e^{w y'_t − w²/2}],
//
// u = s + c, w = B·s + c, r = (N − M·B)/N + (B/N)(M − L), and the score is ln A₁ − ln A₀.
func (d *design) advShuffleEpochLogLR(ys []float64) float64 {
	s, c := d.s, d.own
	b, n, m := float64(d.cfg.Batch), float64(d.cfg.N), float64(d.m)
	rest := (n-m*b)/n + b/n*(m-float64(len(ys)))
	a0, a1 := math.Inf(-1), math.Inf(-1)
	if rest > 0 {
		a0, a1 = math.Log(rest), math.Log(rest)
	}
	lb := math.Log(b / n)
	u, w := s+c, b*s+c
	for _, y := range ys {
		y += b * s
		a0 = numeric.LogAddExp(a0, lb+s*y-s*s/2)
		t := w*y - w*w/2 - math.Log(b)
		if b > 1 {
			t = numeric.LogAddExp(math.Log1p(-1/b)+u*y-u*u/2, t)
		}
		a1 = numeric.LogAddExp(a1, lb+t)
	}
	return a1 - a0
}

// allocationTables are, for a canary at index j of N, ln of the hypergeometric probability
// that kb of the k ordinary examples sharing its round lie below it: hyp[k][kb].
type allocationTables struct{ hyp [][]float64 }

func newAllocationTables(n, j int) *allocationTables {
	n1 := n - 1
	t := &allocationTables{hyp: make([][]float64, n1+1)}
	for k := range t.hyp {
		row := make([]float64, k+1)
		for kb := range row {
			row[kb] = math.Inf(-1)
			if kb <= j && k-kb <= n1-j {
				row[kb] = lnChoose(j, kb) + lnChoose(n1-j, k-kb) - lnChoose(n1, k)
			}
		}
		t.hyp[k] = row
	}
	return t
}

// advAllocationEpochLogLR is one allocation epoch's log-likelihood ratio under the cross-row
// fault, from its observed rounds ys (the first L of M). The N − 1 ordinary examples fall in
// the rounds as Multinomial(N − 1; 1/M), so with H_t(x) = Σ_k φ(y_t + s k) x^k/k! (φ ≡ 1 for
// an unobserved round) the likelihood without the canary is ∝ [x^{N−1}] Π_t H_t(x). With it,
// the canary's round R is uniform; of the k ordinary examples there, kb ~ Hypergeometric lie
// below it, and the round shows k − erased(kb, k − kb) of them plus its own push c:
// H'_R(x) = Σ_k x^k/k! Σ_kb P(kb | k) φ(y_R + s(k − erased) − c), and the likelihood is
// ∝ (1/M) Σ_R [x^{N−1}] H'_R(x) Π_{t≠R} H_t(x). Both are computed in the log domain with
// prefix and suffix products.
func (d *design) advAllocationEpochLogLR(ys []float64, tab *allocationTables) float64 {
	n1, m, phys := d.cfg.N-1, d.m, d.cfg.Batch
	s, c := d.s, d.own
	lf := make([]float64, n1+1) // ln k!
	for k := range lf {
		lf[k], _ = math.Lgamma(float64(k + 1))
	}
	h := make([][]float64, m)
	for t := range h {
		p := make([]float64, n1+1)
		for k := range p {
			p[k] = -lf[k]
			if t < len(ys) {
				z := ys[t] + s*float64(k)
				p[k] -= z * z / 2
			}
		}
		h[t] = p
	}
	one := make([]float64, n1+1)
	for k := range one {
		one[k] = math.Inf(-1)
	}
	one[0] = 0
	pre := make([][]float64, m+1)
	pre[0] = one
	for t := range m {
		pre[t+1] = polyMulLog(pre[t], h[t])
	}
	suf := make([][]float64, m+1)
	suf[m] = one
	for t := m - 1; t >= 0; t-- {
		suf[t] = polyMulLog(h[t], suf[t+1])
	}
	l0 := pre[m][n1]
	l1 := math.Inf(-1)
	hr := make([]float64, n1+1)
	for r := range m {
		if r >= len(ys) {
			copy(hr, h[r]) // an unobserved round: no information on its count
		} else {
			for k := range hr {
				acc := math.Inf(-1)
				for kb, lp := range tab.hyp[k] {
					if math.IsInf(lp, -1) {
						continue
					}
					z := ys[r] + s*float64(k-erased(kb, k-kb, phys)) - c
					acc = numeric.LogAddExp(acc, lp-z*z/2)
				}
				hr[k] = acc - lf[k]
			}
		}
		q := polyMulLog(pre[r], hr)
		for a := range q {
			l1 = numeric.LogAddExp(l1, q[a]+suf[r+1][n1-a])
		}
	}
	return l1 - math.Log(float64(m)) - l0
}

// polyMulLog multiplies two polynomials given by the logarithms of their coefficients,
// truncated to the degree of a.
func polyMulLog(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for d := range out {
		mx := math.Inf(-1)
		for i := 0; i <= d && i < len(a); i++ {
			if d-i < len(b) {
				mx = max(mx, a[i]+b[d-i])
			}
		}
		if math.IsInf(mx, -1) {
			out[d] = mx
			continue
		}
		sum := 0.0
		for i := 0; i <= d && i < len(a); i++ {
			if d-i < len(b) {
				sum += math.Exp(a[i] + b[d-i] - mx)
			}
		}
		out[d] = mx + math.Log(sum)
	}
	return out
}

// sortedSampler reports whether the sampler returns batches in increasing index order, so
// that the canary's index decides its row.
func sortedSampler(name string) bool { return name != sampler.NameShuffle }
