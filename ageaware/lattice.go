package ageaware

import (
	"math"
)

// maxLattice is the largest number of points of a client's lattice of sums
// (n·K + 1, see lattice).
const maxLattice = 1 << 18

// lattice places a client's state values on a common grid: value v_x is
// lo + step·off[x] with integer offsets, exactly when the values are
// commensurate (Lin et al.'s 20, 50, 100, 200 Wh are multiples of 10), so that
// the sum of n collected values is lo·n + step·S with S an integer in
// [0, n·K]. Values that are not commensurate within the lattice size limit are
// rounded to K = ⌊(maxLattice − 1)/n⌋ levels of their range (approx = true);
// the rounding moves a value by at most range/(2K).
type lattice struct {
	lo, step float64
	off      []int
	k        int // largest offset
	approx   bool
}

// newLattice finds the coarsest grid, step = (hi − lo)/K with the smallest
// K ≤ ⌊(maxLattice − 1)/n⌋, on which every value lies within a relative 1e-9.
func newLattice(values []float64, n int) lattice {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range values {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	l := lattice{lo: lo, off: make([]int, len(values))}
	if hi == lo {
		l.step = 1
		return l
	}
	r := hi - lo
	kMax := max(1, (maxLattice-1)/n)
	for k := 1; k <= kMax; k++ {
		ok := true
		for _, v := range values {
			x := (v - lo) / r * float64(k)
			if math.Abs(x-math.Round(x)) > 1e-9*float64(k) {
				ok = false
				break
			}
		}
		if ok {
			l.k, l.step = k, r/float64(k)
			break
		}
	}
	if l.k == 0 {
		l.k, l.step, l.approx = kMax, r/float64(kMax), true
	}
	for i, v := range values {
		l.off[i] = int(math.Round((v - lo) / l.step))
	}
	return l
}

// sumPMF returns the law of the sum of n independent offsets drawn from law
// (law[x] the probability of offset off[x]): a vector of length n·k + 1.
func (l *lattice) sumPMF(law []float64, n int) []float64 {
	out := make([]float64, n*l.k+1)
	out[0] = 1
	tmp := make([]float64, len(out))
	top := 0 // largest index reached so far
	for range n {
		clear(tmp[:top+l.k+1])
		for s := 0; s <= top; s++ {
			ps := out[s]
			if ps == 0 {
				continue
			}
			for x, q := range law {
				if q > 0 {
					tmp[s+l.off[x]] += ps * q
				}
			}
		}
		top += l.k
		out, tmp = tmp, out
	}
	return out
}

// mixtureMI returns the mutual information (nats) between Z, with law pz, and
// S = X + R, where R has the law r on 0, 1, … independently of (X, Z) and
// X | Z = z has the law kern(z) over the offsets:
//
//	I(S; Z) = Σ_z pz(z)·D(P_{S|z} ‖ P_S),
//
// each divergence summed as Σ p ln(p/q) − p + q, whose terms are all ≥ 0 (no
// cancellation between positive and negative terms).
func (l *lattice) mixtureMI(pz []float64, kern func(z int, dst []float64), r []float64) float64 {
	n := len(r) + l.k
	cond := make([][]float64, len(pz))
	marg := make([]float64, n)
	kz := make([]float64, len(l.off))
	for z, p := range pz {
		if p <= 0 {
			continue
		}
		kern(z, kz)
		c := make([]float64, n)
		for x, q := range kz {
			if q <= 0 {
				continue
			}
			o := l.off[x]
			for s, v := range r {
				c[s+o] += q * v
			}
		}
		for s, v := range c {
			marg[s] += p * v
		}
		cond[z] = c
	}
	mi := 0.0
	for z, p := range pz {
		if p <= 0 {
			continue
		}
		d := 0.0
		for s, a := range cond[z] {
			b := marg[s]
			switch {
			case a <= 0:
				d += b // a ln(a/b) − a → 0 as a → 0
			case b > 0: // b ≥ p·a > 0 in exact arithmetic
				d += a*math.Log(a/b) - a + b
			}
		}
		mi += p * d
	}
	return math.Max(mi, 0)
}
