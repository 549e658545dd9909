package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// refLaplace is an independent evaluation of the layout documented at
// NoiseKey.Laplace: the Philox words (Philox4x32 is checked against
// Random123's vectors) combined with plain integer arithmetic, and the
// standard library's math.Log.
func refLaplace(key NoiseKey, i uint64) float64 {
	w := Philox4x32([4]uint32{uint32(i / 2), key.Tensor, uint32(key.Step), uint32(key.Step >> 32)},
		[2]uint32{uint32(key.Seed), uint32(key.Seed >> 32)})
	hi, lo := w[0], w[1]
	if i%2 == 1 {
		hi, lo = w[2], w[3]
	}
	m := (uint64(hi)*(1<<32) + uint64(lo)) / (1 << 11)
	u := (float64(m%(1<<52)) + 1) / (1 << 52)
	e := -math.Log(u)
	if m/(1<<52) == 1 {
		return -e
	}
	return e
}

// The stream is what the NoiseKey.Laplace comment says: each value is within
// 2 ulp (logUnit's ulp plus math.Log's) of the math.Log reference, Laplace(i)
// gives the values of AddLaplaceAt, and the sign is that of the reference.
func TestLaplaceMatchesReference(t *testing.T) {
	const n = 1 << 13
	for _, key := range testKeys {
		for _, off := range []uint64{0, 2001, MaxStreamLen - n} {
			got := make([]float64, n)
			AddLaplaceAt(got, 1, key, off)
			for k := range got {
				i := off + uint64(k)
				want := refLaplace(key, i)
				if d := math.Abs(got[k] - want); d > 2*ulp(want) {
					t.Fatalf("key %+v value %d: got %v, reference %v (diff %.3g ulp)", key, i, got[k], want, d/ulp(want))
				}
				if want != 0 && math.Signbit(got[k]) != math.Signbit(want) {
					t.Fatalf("key %+v value %d: sign of %v, reference %v", key, i, got[k], want)
				}
				if x := key.Laplace(i); x != got[k] {
					t.Fatalf("key %+v value %d: Laplace gives %v, AddLaplaceAt %v", key, i, x, got[k])
				}
			}
		}
	}
}

// The end points of the map from m to x: the largest magnitude 52·ln 2 at
// u = 2⁻⁵², zero at u = 1, and the sign bit convention.
func TestLaplaceUnitEnds(t *testing.T) {
	if LaplaceMax != 52*math.Ln2 || math.Abs(LaplaceMax-36.04365338911715) > 1e-13 {
		t.Fatalf("LaplaceMax = %v", LaplaceMax)
	}
	cases := []struct {
		m    uint64
		want float64
	}{
		{0, LaplaceMax},                                     // s = 0, u = 2⁻⁵²
		{1 << 52, -LaplaceMax},                              // s = 1, u = 2⁻⁵²
		{1<<52 - 1, 0},                                      // u = 1
		{1<<53 - 1, 0},                                      // u = 1
		{1<<51 - 1, math.Ln2},                               // u = 1/2
		{1<<52 + 1<<51 - 1, -math.Ln2},                      // u = 1/2, s = 1
		{1<<52 + 1<<50 - 1, -2 * math.Ln2},                  // u = 1/4, s = 1
		{1, -math.Log(2 * 0x1p-52)},                         // u = 2·2⁻⁵²
		{1<<52 - 2, -math.Log(1 - 0x1p-52)},                 // u = 1 − 2⁻⁵²
		{1<<53 - 2, math.Log(float64(1<<52-1) / (1 << 52))}, // s = 1
	}
	for _, c := range cases {
		got := laplaceUnit(c.m)
		if math.Abs(got-c.want) > ulp(c.want) {
			t.Errorf("laplaceUnit(%#x) = %v, want %v", c.m, got, c.want)
		}
	}
	// Every value of a long stream lies within ±LaplaceMax.
	x := make([]float64, 1<<16)
	AddLaplace(x, 1, NoiseKey{Seed: 3})
	for i, v := range x {
		if !(math.Abs(v) <= LaplaceMax) {
			t.Fatalf("value %d = %v beyond LaplaceMax", i, v)
		}
	}
}

// Moments of a long stream against Laplace(0, η): mean, E|x| = η,
// variance 2η², skewness 0 and excess kurtosis 3 within 5 standard errors.
// The standard errors of the sample skewness and kurtosis follow from the
// delta method with the Laplace moments μ₂ₖ = (2k)!·η²ᵏ:
// Var(skew) ≈ (μ₆ − 6σ²μ₄ + 9σ⁶)/(σ⁶n) = 63/n and
// Var(kurt) ≈ [(μ₈ − μ₄²)/σ⁸ − 4μ₄(μ₆ − σ²μ₄)/σ¹⁰ + 4μ₄²(μ₄ − σ⁴)/σ¹²]/n = 1188/n.
func TestLaplaceMoments(t *testing.T) {
	n := 1 << 20
	if testing.Short() {
		n = 1 << 17
	}
	const eta = 2.5
	x := make([]float64, n)
	abs := make([]float64, n)
	for _, key := range testKeys[1:3] {
		clear(x)
		AddLaplace(x, eta, key)
		for i, v := range x {
			abs[i] = math.Abs(v)
		}
		mean, sd := stat.MeanStdDev(x, nil)
		rn := math.Sqrt(float64(n))
		checks := []struct {
			name      string
			got, want float64
			stderr    float64
		}{
			{"mean", mean, 0, math.Sqrt2 * eta / rn},
			{"mean |x|", stat.Mean(abs, nil), eta, eta / rn},
			{"variance", sd * sd, 2 * eta * eta, math.Sqrt(20) * eta * eta / rn},
			{"skewness", stat.Skew(x, nil), 0, math.Sqrt(63) / rn},
			{"excess kurtosis", stat.ExKurtosis(x, nil), 3, math.Sqrt(1188) / rn},
		}
		for _, c := range checks {
			if math.Abs(c.got-c.want) > 5*c.stderr {
				t.Errorf("key %+v: %s = %.5f, want %g ± %.5f", key, c.name, c.got, c.want, 5*c.stderr)
			}
		}
	}
}

// Kolmogorov–Smirnov tests of a million draws against the Laplace CDF (gonum
// distuv), of their magnitudes against Exp(1/η), and tail frequencies
// P(|x| > t) = e^{−t/η} as binomial counts.
func TestLaplaceKS(t *testing.T) {
	n := 1 << 20
	if testing.Short() {
		n = 1 << 16
	}
	const eta = 0.75
	lap := distuv.Laplace{Mu: 0, Scale: eta}
	expo := distuv.Exponential{Rate: 1 / eta}
	for ki, key := range testKeys {
		m := n
		if ki > 1 {
			m = n / 8
		}
		x := make([]float64, m)
		AddLaplaceAt(x, eta, key, 777)
		abs := make([]float64, m)
		neg := 0
		for i, v := range x {
			abs[i] = math.Abs(v)
			if v < 0 {
				neg++
			}
		}
		for _, tail := range []float64{3, 6, 9} {
			cnt := 0
			for _, a := range abs {
				if a > tail*eta {
					cnt++
				}
			}
			p := math.Exp(-tail)
			mean, sd := float64(m)*p, math.Sqrt(float64(m)*p*(1-p))
			if math.Abs(float64(cnt)-mean) > 5*sd+1 {
				t.Errorf("key %+v: %d draws beyond %gη, want %.1f ± %.1f", key, cnt, tail, mean, 5*sd+1)
			}
		}
		if d := math.Abs(float64(neg) - float64(m)/2); d > 5*math.Sqrt(float64(m))/2 {
			t.Errorf("key %+v: %d negative draws of %d", key, neg, m)
		}
		if d := ksStat(x, lap.CDF); d > ksCritical(m) {
			t.Errorf("key %+v: KS distance to Laplace(0, %g) %.5f > %.5f", key, eta, d, ksCritical(m))
		}
		if d := ksStat(abs, expo.CDF); d > ksCritical(m) {
			t.Errorf("key %+v: KS distance of |x| to Exp %.5f > %.5f", key, d, ksCritical(m))
		}
	}
}

// Neighbouring values, the two values of one block and their magnitudes are
// uncorrelated, and keys that differ in one field give unrelated streams.
func TestLaplaceStreamsIndependent(t *testing.T) {
	const n = 1 << 16
	base := NoiseKey{Seed: 42, Step: 1000, Tensor: 3}
	xb := make([]float64, n)
	AddLaplace(xb, 1, base)
	lim := 5 / math.Sqrt(n)
	for _, v := range []NoiseKey{{Seed: 43, Step: 1000, Tensor: 3}, {Seed: 42, Step: 1001, Tensor: 3}, {Seed: 42, Step: 1000, Tensor: 4}} {
		xv := make([]float64, n)
		AddLaplace(xv, 1, v)
		if r := stat.Correlation(xb, xv, nil); math.Abs(r) > lim {
			t.Errorf("key %+v: correlation with %+v = %.4f", v, base, r)
		}
	}
	if r := stat.Correlation(xb[1:], xb[:n-1], nil); math.Abs(r) > lim {
		t.Errorf("lag-1 autocorrelation %.4f", r)
	}
	even, odd := make([]float64, n/2), make([]float64, n/2)
	for i := range even {
		even[i], odd[i] = math.Abs(xb[2*i]), math.Abs(xb[2*i+1])
	}
	if r := stat.Correlation(even, odd, nil); math.Abs(r) > 5/math.Sqrt(n/2) {
		t.Errorf("within-block correlation of |x| %.4f", r)
	}
	// Sign and magnitude of one value are independent: E[x] over values
	// with |x| above its median is 0.
	s, cnt := 0.0, 0
	for _, v := range xb {
		if math.Abs(v) > math.Ln2 {
			s += v
			cnt++
		}
	}
	// Var(x | |x| > ln 2) = E[(ln2 + E)²] = ln²2 + 2 ln 2 + 2.
	if sd := math.Sqrt((math.Ln2*math.Ln2 + 2*math.Ln2 + 2) / float64(cnt)); math.Abs(s/float64(cnt)) > 5*sd {
		t.Errorf("mean of the large draws %.4f, want 0 ± %.4f", s/float64(cnt), 5*sd)
	}
}

func checkAddLaplaceElementwise[T Float](t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	key := NoiseKey{Seed: 19, Step: 18, Tensor: 17}
	for _, n := range testLengths {
		for _, off := range []uint64{0, 1, 2, 1001} {
			d0 := make([]T, n)
			for i := range d0 {
				d0[i] = T(rng.NormFloat64())
			}
			d := slices.Clone(d0)
			AddLaplaceAt(d, 0.7, key, off)
			for i := range d {
				x := key.Laplace(off + uint64(i))
				if want := stdAdd(d0[i], 0.7, x); d[i] != want {
					t.Fatalf("n=%d off=%d: AddLaplaceAt[%d] = %v, element-wise %v", n, off, i, d[i], want)
				}
			}
			if off == 0 {
				d2 := slices.Clone(d0)
				AddLaplace(d2, 0.7, key)
				if !slices.Equal(d2, d) {
					t.Fatalf("n=%d: AddLaplace differs from AddLaplaceAt(…, 0)", n)
				}
			}
		}
	}
}

// Each element is T(FMA(scale, x_k, float64(dst[k]))), for every length and
// offset that exercises the vector groups, the tail, the buffer passes and the
// parallel split.
func TestAddLaplaceElementwise(t *testing.T) {
	t.Run("float64", checkAddLaplaceElementwise[float64])
	t.Run("float32", checkAddLaplaceElementwise[float32])
}

// The result does not depend on how a tensor is cut into windows, on the
// number of goroutines that noise them concurrently, nor on GOMAXPROCS; the
// float32 result is the float64 one rounded once.
func TestAddLaplaceChunkingInvariance(t *testing.T) {
	checkChunkingInvariance(t, AddLaplaceAt[float32], 81)
	const n = 5*parMin + 77
	key := NoiseKey{Seed: 5, Step: 6, Tensor: 2}
	want := make([]float32, n)
	AddLaplace(want, 1.3, key)

	w64 := make([]float64, n)
	AddLaplace(w64, 1.3, key)
	for i := range w64 {
		if want[i] != float32(w64[i]) {
			t.Fatalf("[%d]: float32 %v, float64 %v", i, want[i], w64[i])
		}
	}
}

// The last block of a stream is usable; one value past it panics, as do a
// non-finite or negative scale and an out-of-range Laplace index; scale 0
// leaves the data unchanged and the noise is linear in the scale.
func TestLaplaceBounds(t *testing.T) {
	key := NoiseKey{Seed: 1, Step: 2, Tensor: 3}
	d := make([]float64, 2)
	AddLaplaceAt(d, 1, key, MaxStreamLen-2)
	for k := range d {
		if want := refLaplace(key, MaxStreamLen-2+uint64(k)); math.Abs(d[k]-want) > 2*ulp(want) {
			t.Errorf("last block [%d]: %v, reference %v", k, d[k], want)
		}
	}
	mustPanic(t, "window past the end", func() { AddLaplaceAt(d, 1, key, MaxStreamLen-1) })
	mustPanic(t, "offset past the end", func() { AddLaplaceAt(d[:0], 1, key, MaxStreamLen+1) })
	mustPanic(t, "NaN scale", func() { AddLaplace(d, math.NaN(), key) })
	mustPanic(t, "Inf scale", func() { AddLaplace(d, math.Inf(1), key) })
	mustPanic(t, "negative scale", func() { AddLaplace(d, -1, key) })
	mustPanic(t, "Laplace index", func() { key.Laplace(MaxStreamLen) })
	a := []float64{1, 2, 3}
	AddLaplace(a, 0, key)
	if !slices.Equal(a, []float64{1, 2, 3}) {
		t.Errorf("scale 0 changed the data: %v", a)
	}
	a, b := make([]float64, 100), make([]float64, 100)
	AddLaplace(a, 1, key)
	AddLaplace(b, 4, key)
	for i := range a {
		if b[i] != 4*a[i] {
			t.Fatalf("[%d]: scale 4 gives %v, 4 × scale 1 gives %v", i, b[i], 4*a[i])
		}
	}
}
