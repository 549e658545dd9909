package kernels

import (
	"math"
	mrand "math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// testSecureSource returns a SecureSource keyed by a fixed seed instead of the
// OS, so that the statistical tests are deterministic.
func testSecureSource(seed byte) *SecureSource {
	s := new(SecureSource)
	s.c.Seed([32]byte{seed, 1, 2, 3})
	return s
}

// secureZMax is the largest |z| the moment tests accept.
const secureZMax = 5

func requireSecureZ(t *testing.T, what string, got, want, se float64) {
	t.Helper()
	if z := (got - want) / se; !(math.Abs(z) <= secureZMax) {
		t.Errorf("%s = %.6g, want %.6g (se %.3g): z = %.2f", what, got, want, se, z)
	}
}

// moments returns the mean, the variance about the known mean 0, and the
// kurtosis m₄/m₂² about 0 (3 for a normal law) of x scaled by 1/std.
func moments(x []float64, std float64) (mean, variance, kurt float64) {
	var s1, s2, s4 float64
	for _, v := range x {
		z := v / std
		s1 += z
		s2 += z * z
		s4 += z * z * z * z
	}
	n := float64(len(x))
	return s1 / n, s2 / n, (s4 / n) / ((s2 / n) * (s2 / n))
}

// requireNormalMoments z-tests mean, variance and kurtosis of x against
// N(0, std²): standard errors 1/√n, √(2/n) and √(24/n) (in units of std).
func requireNormalMoments(t *testing.T, what string, x []float64, std float64) {
	t.Helper()
	n := float64(len(x))
	mean, v, m4 := moments(x, std)
	requireSecureZ(t, what+" mean/std", mean, 0, 1/math.Sqrt(n))
	requireSecureZ(t, what+" variance/std²", v, 1, math.Sqrt(2/n))
	requireSecureZ(t, what+" kurtosis", m4, 3, math.Sqrt(24/n))
}

// secureMethods are the two secure samplers, as loops over one source.
var secureMethods = []struct {
	name string
	f64  func(r mrand.Source, std float64, dst []float64)
	f32  func(r mrand.Source, std float64, dst []float32)
}{
	{"grid", func(r mrand.Source, std float64, dst []float64) {
		gs := newGridSampler(std)
		gridNoise(r, &gs, dst)
	}, func(r mrand.Source, std float64, dst []float32) {
		gs := newGridSampler(std)
		gridNoise(r, &gs, dst)
	}},
	{"sum4", func(r mrand.Source, std float64, dst []float64) { sum4Noise(r, std, dst) },
		func(r mrand.Source, std float64, dst []float32) { sum4Noise(r, std, dst) }},
}

// TestSecureGaussianMoments: 10⁶ draws of each method (float64 and float32
// destinations) have the mean, variance and kurtosis of N(0, std²), and the
// grid method has the normal tail masses P(|X| > 3·std), P(|X| > 4·std)
// (binomial z-tests against 2Φ(−3), 2Φ(−4) from gonum).
func TestSecureGaussianMoments(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 200_000
	}
	const std = 1.7
	for i, m := range secureMethods {
		x := make([]float64, n)
		m.f64(testSecureSource(byte(10+i)), std, x)
		requireNormalMoments(t, m.name+" float64", x, std)
		y := make([]float32, n)
		m.f32(testSecureSource(byte(20+i)), std, y)
		for j, v := range y {
			x[j] = float64(v)
		}
		requireNormalMoments(t, m.name+" float32", x, std)
		for _, c := range []float64{3, 4} {
			p := 2 * distuv.UnitNormal.CDF(-c)
			k := 0
			for _, v := range x {
				if math.Abs(v) > c*std {
					k++
				}
			}
			requireSecureZ(t, m.name+" tail mass", float64(k)/float64(n), p, math.Sqrt(p*(1-p)/float64(n)))
		}
	}
}

// TestSecureGaussianKS: Kolmogorov–Smirnov distance of 2¹⁸ draws to
// N(0, std²) below the α = 10⁻⁴ critical value; the same draws are rejected
// against N(0, (1.05·std)²), so the test has power against a 5% scale error.
func TestSecureGaussianKS(t *testing.T) {
	n := 1 << 18
	if testing.Short() {
		n = 1 << 15
	}
	for i, m := range secureMethods {
		for _, std := range []float64{1e-3, 0.75, 3e4} {
			x := make([]float64, n)
			m.f64(testSecureSource(byte(30+i)), std, x)
			right := distuv.Normal{Mu: 0, Sigma: std}
			if d := ksStat(x, right.CDF); d > ksCritical(n) {
				t.Errorf("%s std=%g: KS distance %.5f > %.5f", m.name, std, d, ksCritical(n))
			}
			if testing.Short() {
				continue
			}
			wrong := distuv.Normal{Mu: 0, Sigma: 1.05 * std}
			if d := ksStat(x, wrong.CDF); d <= ksCritical(n) {
				t.Errorf("%s std=%g: KS accepted N(0, (1.05 std)²): %.5f", m.name, std, d)
			}
		}
	}
}

// TestGridLowBitsUniform: the integer noise m is smooth on the integers, with
// no holes in its low bits (what a floating-point sampler scaled by 2^45
// would have): m mod 1024 and ⌊m/2^40⌋ mod 64 are uniform (chi-square, 2·10⁵
// draws, p > 10⁻⁴), and both signs and parities occur equally often.
func TestGridLowBitsUniform(t *testing.T) {
	const n = 200_000
	gs := newGridSampler(2.5)
	r := mrand.NewChaCha8([32]byte{7})
	low := make([]float64, 1024)
	mid := make([]float64, 64)
	for range n {
		m := gs.next(r)
		low[m&1023]++
		mid[(m>>40)&63]++
	}
	for _, c := range []struct {
		name  string
		count []float64
	}{{"m mod 1024", low}, {"⌊m/2^40⌋ mod 64", mid}} {
		e := float64(n) / float64(len(c.count))
		stat := 0.0
		for _, o := range c.count {
			stat += (o - e) * (o - e) / e
		}
		df := float64(len(c.count) - 1)
		if p := (distuv.ChiSquared{K: df}).Survival(stat); !(p > 1e-4) {
			t.Errorf("%s: chi-square %.1f on %g df, p = %.3g", c.name, stat, df, p)
		}
	}
}

// TestGridEnvelope: for grids across one octave of std (s/w from 1 to 2),
// the acceptance exponent G·ln 2 − ln K − t²/2 is ≤ 0 at the point of every
// block nearest 0 (so a(m) ≤ 1 everywhere), and reaches 0 on some block (K is
// the least envelope constant).
func TestGridEnvelope(t *testing.T) {
	for i := 0; i <= 64; i++ {
		std := 1 + float64(i)/64*(1-0x1p-52)
		gs := newGridSampler(std)
		best := math.Inf(-1)
		for G := 0; G <= 40; G++ {
			for _, m := range []int64{int64(G) << secureBlockBits, -(int64(G) << secureBlockBits) - 1} {
				tt := float64(m) * gs.invS
				a := float64(G)*math.Ln2 - gs.lnK - tt*tt/2
				if a > 1e-15 {
					t.Fatalf("std %v block %d m %d: log acceptance %g > 0", std, G, m, a)
				}
				best = max(best, a)
			}
		}
		if best < -1e-12 {
			t.Errorf("std %v: envelope not tight, max log acceptance %g", std, best)
		}
	}
}

// TestSecureGridAligned: every output of AddSecureGaussian is a multiple of
// g = SecureGrid(std), for float64 and float32 destinations and inputs of
// any magnitude; the output depends on x only through round(x/g) (inputs in
// the same grid cell give bit-identical outputs from the same stream), and
// moving x by one grid step moves the output by exactly g — while the
// default AddGaussian's output does depend on the low bits of x.
func TestSecureGridAligned(t *testing.T) {
	xs := []float64{0, 0.3, -0.3, 1e-9, 7.25, -1234.5678, 1e6 + 1.0/3, 3e15}
	for _, std := range []float64{0.011, 1, 1.9999, 37.5, 1e5} {
		g := SecureGrid(std)
		if !(std/g >= 0x1p45 && std/g < 0x1p46) {
			t.Fatalf("std %v: grid %v gives s = %v", std, g, std/g)
		}
		if fr, _ := math.Frexp(g); fr != 0.5 {
			t.Fatalf("std %v: grid %v is not a power of two", std, g)
		}
		gs := newGridSampler(std)
		for _, x := range xs {
			k := math.RoundToEven(x / g)
			in := []float64{x, k*g + 0.4*g, k*g - 0.4*g, (k + 1) * g}
			out := make([][]float64, len(in))
			for j, v := range in {
				d := []float64{v, v, v, v}
				gridNoise(mrand.NewChaCha8([32]byte{9}), &gs, d)
				out[j] = d
				for _, o := range d {
					if math.Mod(o, g) != 0 {
						t.Fatalf("std %v x %v: output %v not a multiple of g = %v", std, v, o, g)
					}
				}
				d32 := []float32{float32(v), float32(v)}
				gridNoise(mrand.NewChaCha8([32]byte{9}), &gs, d32)
				for _, o := range d32 {
					if math.Mod(float64(o), g) != 0 {
						t.Fatalf("std %v x %v: float32 output %v not a multiple of g = %v", std, v, o, g)
					}
				}
			}
			if math.Abs(x) < 0x1p40*g { // grid cells are narrower than x's ulp beyond
				if !slices.Equal(out[0], out[1]) || !slices.Equal(out[0], out[2]) {
					t.Errorf("std %v x %v: outputs depend on x within its grid cell: %v %v %v", std, x, out[0], out[1], out[2])
				}
				for j := range out[3] {
					if out[3][j]-out[0][j] != g {
						t.Errorf("std %v x %v: next grid point shifts the output by %v, want g = %v", std, x, out[3][j]-out[0][j], g)
					}
				}
			}
		}
	}
	// The default floating-point noise keeps the low bits of x: two inputs
	// 2⁻⁴⁰ apart give different outputs from the same stream. This is what
	// the grid removes.
	key := NoiseKey{Seed: 1, Step: 2, Tensor: 3}
	a, b := []float64{0.3}, []float64{0.3 + 0x1p-40}
	AddGaussian(a, 1, key)
	AddGaussian(b, 1, key)
	if a[0] == b[0] {
		t.Errorf("AddGaussian hid a 2⁻⁴⁰ change of x; the comparison above proves nothing")
	}
}

// TestSecureSplit: through the public API on a deterministic source, a
// tensor long enough to be split over goroutines has normal moments, and the
// pieces are not copies of one another (each child is keyed differently).
func TestSecureSplit(t *testing.T) {
	const n = 300_000
	for _, m := range []struct {
		name string
		f    func(*SecureSource, []float64, float64)
	}{{"grid", AddSecureGaussian[float64]}, {"sum4", AddSecureGaussianSum4[float64]}} {
		x := make([]float64, n)
		m.f(testSecureSource(40), x, 0.5)
		requireNormalMoments(t, m.name+" split", x, 0.5)
		if slices.Equal(x[:100], x[parGrain:parGrain+100]) || slices.Equal(x[:100], x[n/2:n/2+100]) {
			t.Errorf("%s: pieces repeat the same noise", m.name)
		}
	}
}

// TestSecureSourcesDiffer: two sources from the OS give different streams
// and different noise; a source rekeys itself from the OS after
// SecureReseedWords outputs (a copy of its state agrees up to then and not
// after).
func TestSecureSourcesDiffer(t *testing.T) {
	a, err := NewSecureSource()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSecureSource()
	if err != nil {
		t.Fatal(err)
	}
	same := 0
	for range 64 {
		if a.Uint64() == b.Uint64() {
			same++
		}
	}
	if same > 0 {
		t.Errorf("two OS-keyed sources agree on %d of 64 words", same)
	}
	x, y := make([]float32, 1000), make([]float32, 1000)
	AddSecureGaussian(a, x, 1)
	AddSecureGaussian(b, y, 1)
	if slices.Equal(x, y) {
		t.Error("two sources gave the same noise")
	}

	c := testSecureSource(50)
	d := *c
	for i := range SecureReseedWords {
		if c.Uint64() != d.Uint64() {
			t.Fatalf("copies diverge at word %d before the rekey", i)
		}
	}
	diff := 0
	for range 8 {
		if c.Uint64() != d.Uint64() {
			diff++
		}
	}
	if diff < 7 {
		t.Errorf("after SecureReseedWords outputs, only %d of 8 words differ: no rekey from the OS", diff)
	}
}

// TestSecureStdRefused: std ≤ 0, NaN, ±Inf and values outside
// [SecureStdMin, SecureStdMax] panic in both samplers and SecureGrid; the
// bounds themselves are accepted.
func TestSecureStdRefused(t *testing.T) {
	src := testSecureSource(60)
	dst := make([]float32, 4)
	calls := map[string]func(float64){
		"AddSecureGaussian":     func(s float64) { AddSecureGaussian(src, dst, s) },
		"AddSecureGaussianSum4": func(s float64) { AddSecureGaussianSum4(src, dst, s) },
		"SecureGrid":            func(s float64) { SecureGrid(s) },
	}
	for name, f := range calls {
		for _, s := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1), SecureStdMin / 2, SecureStdMax * 2} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s(std = %v) did not panic", name, s)
					}
				}()
				f(s)
			}()
		}
		for _, s := range []float64{SecureStdMin, SecureStdMax, 1} {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s(std = %v) panicked: %v", name, s, r)
					}
				}()
				f(s)
			}()
		}
	}
}

// wordSource returns the given words in turn (then zeros).
type wordSource struct{ w []uint64 }

func (s *wordSource) Uint64() uint64 {
	if len(s.w) == 0 {
		return 0
	}
	v := s.w[0]
	s.w = s.w[1:]
	return v
}

// TestBernoulliExact: bernoulli(a) accepts exactly the words below a·2⁶⁴ for
// a ≥ 2⁻¹², and for smaller a first requires 52 zero bits; bernoulliExp's
// range reduction reproduces math.Exp where that is a normal number; and its
// acceptance frequency at A = −1 is e⁻¹.
func TestBernoulliExact(t *testing.T) {
	for _, a := range []float64{0.3, 0.75, 0x1p-12, 1 - 0x1p-53, 0.5} {
		th := uint64(a * 0x1p64)
		if !bernoulli(&wordSource{[]uint64{th - 1}}, a) || bernoulli(&wordSource{[]uint64{th}}, a) {
			t.Errorf("a = %v: threshold is not a·2⁶⁴ = %d", a, th)
		}
	}
	a := 0x1p-60 // 2⁻⁵²·2⁻⁸: 52 zero bits, then a word below 2⁵⁶
	if !bernoulli(&wordSource{[]uint64{1<<12 - 1, 1<<56 - 1}}, a) {
		t.Error("2⁻⁶⁰: zero top bits then a word below 2⁵⁶ rejected")
	}
	if bernoulli(&wordSource{[]uint64{1 << 12, 0}}, a) {
		t.Error("2⁻⁶⁰: a first word with a one in its top 52 bits accepted")
	}
	if bernoulli(&wordSource{[]uint64{0, 1 << 56}}, a) {
		t.Error("2⁻⁶⁰: second word 2⁵⁶ accepted")
	}
	if bernoulli(&wordSource{}, 0) || !bernoulli(&wordSource{[]uint64{^uint64(0)}}, 1) {
		t.Error("a = 0 accepted or a = 1 rejected")
	}
	// Range reduction: 2^(−52k)·exp(A + 52k·ln 2) = exp(A).
	for A := -700.0; A < -36; A += 13.7 {
		k := math.Floor(-A / ln2x52)
		r := math.FMA(k, ln2x52, A)
		if !(r > -36.1 && r <= 0) {
			t.Fatalf("A = %v: reduced exponent %v outside (−36.1, 0]", A, r)
		}
		got := math.Ldexp(math.Exp(r), -52*int(k))
		if rel := math.Abs(got/math.Exp(A) - 1); rel > 1e-12 {
			t.Errorf("A = %v: reduced probability off by %.3g", A, rel)
		}
	}
	const n = 400_000
	r := mrand.NewChaCha8([32]byte{11})
	k := 0
	for range n {
		if bernoulliExp(r, -1) {
			k++
		}
	}
	p := math.Exp(-1)
	requireSecureZ(t, "P(bernoulliExp(−1))", float64(k)/n, p, math.Sqrt(p*(1-p)/n))
}

// TestSecureNonFinite: NaN and ±Inf inputs stay non-finite (the grid does not
// turn them into numbers), and zero-length destinations are fine.
func TestSecureNonFinite(t *testing.T) {
	src := testSecureSource(70)
	x := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	AddSecureGaussian(src, x, 1)
	if !math.IsNaN(x[0]) || !math.IsInf(x[1], 1) || !math.IsInf(x[2], -1) {
		t.Errorf("non-finite inputs became %v", x)
	}
	AddSecureGaussian(src, []float32{}, 1)
	AddSecureGaussianSum4(src, []float32{}, 1)
}

// TestAcceptExpSqueeze: acceptExp's squeeze never decides differently from
// the comparison U < fl(exp(A))·2⁶⁴ it short-cuts, for A over [−8, 0] and
// words U at the threshold, next to it, near the squeeze bounds, and at
// random.
func TestAcceptExpSqueeze(t *testing.T) {
	r := mrand.New(mrand.NewPCG(1, 2))
	for i := 0; i < 200_000; i++ {
		A := -8 * r.Float64()
		if i%1000 == 0 {
			A = -float64(i/1000) * 0.04 // includes A = 0 and multiples of ln 2's neighbourhood
		}
		a := math.Exp(A)
		var th uint64
		if a >= 1 {
			th = math.MaxUint64
		} else {
			th = uint64(a * 0x1p64)
		}
		words := []uint64{th - 1, th, th + 1, r.Uint64(), th - 1<<20 + r.Uint64N(1<<21), th - th>>30, th + th>>30}
		for _, u := range words {
			want := u < th || a >= 1
			if got := acceptExp(&wordSource{[]uint64{u}}, A); got != want {
				t.Fatalf("A = %v, U = %d, threshold %d: acceptExp = %v, want %v", A, u, th, got, want)
			}
		}
	}
}

// TestGridRoundingSensitivity checks, independently of the formula it justifies, the
// sensitivity that secure mode's σ_eff = σC/(C + g√d) assumes (engine.SecureEffectiveSigma):
// two clipped sums at distance at most C are at most C + g√d apart after rounding to the
// noise's grid g, over random pairs; and the g√d term is needed — two sums that straddle the
// midpoints of the grid in every coordinate, a hair apart, round g√d apart.
func TestGridRoundingSensitivity(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(3, 4))
	const d, clip = 64, 1.0
	for _, std := range []float64{1e-3, 0.7, 1, 123.4} {
		gs := newGridSampler(std)
		g := gs.g
		bound := clip + g*math.Sqrt(d)
		x, y := make([]float64, d), make([]float64, d)
		for range 2000 {
			var n2 float64
			for j := range x {
				x[j] = 10 * std * rng.NormFloat64()
				y[j] = rng.NormFloat64()
				n2 += y[j] * y[j]
			}
			scale := clip * rng.Float64() / math.Sqrt(n2)
			var r2 float64
			for j := range x {
				diff := gs.roundToGrid(x[j]+y[j]*scale) - gs.roundToGrid(x[j])
				r2 += diff * diff
			}
			if r := math.Sqrt(r2); !(r <= bound) {
				t.Fatalf("std %g: rounded sums %v apart, above C + g√d = %v", std, r, bound)
			}
		}
		// Straddling every midpoint: k·g + g/2 ∓ g/8 round to k·g and (k+1)·g.
		var r2 float64
		for range d {
			k := float64(rng.IntN(1000) - 500)
			lo, hi := (k+0.5-0.125)*g, (k+0.5+0.125)*g
			diff := gs.roundToGrid(hi) - gs.roundToGrid(lo)
			r2 += diff * diff
		}
		if r := math.Sqrt(r2); math.Abs(r-g*math.Sqrt(d)) > 1e-12*r {
			t.Fatalf("std %g: straddling sums %g·g√d apart after rounding, want g√d", std, r/(g*math.Sqrt(d)))
		}
	}
}
