package kernels

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// refNormals is an independent evaluation of the stream layout documented at
// NoiseKey: Philox4x32 (checked against Random123's vectors), the uniforms
// built from the words with plain arithmetic, and Box–Muller with the
// standard library's math.Log and math.Sincos.
func refNormals(key NoiseKey, j uint32) (z0, z1, u1, u2 float64) {
	w := Philox4x32([4]uint32{j, key.Tensor, uint32(key.Step), uint32(key.Step >> 32)},
		[2]uint32{uint32(key.Seed), uint32(key.Seed >> 32)})
	m1 := (uint64(w[0])<<32 + uint64(w[1])) / (1 << 11)
	m2 := (uint64(w[2])<<32 + uint64(w[3])) / (1 << 11)
	u1 = (float64(m1) + 1) / (1 << 53)
	u2 = float64(m2) / (1 << 53)
	r := math.Sqrt(-2 * math.Log(u1))
	s, c := math.Sincos(2 * math.Pi * u2)
	return r * c, r * s, u1, u2
}

var testKeys = []NoiseKey{
	{},
	{Seed: 1, Step: 0, Tensor: 0},
	{Seed: 0xdeadbeefcafef00d, Step: 123456789012, Tensor: 7},
	{Seed: ^uint64(0), Step: ^uint64(0), Tensor: ^uint32(0)},
}

// The stream is what the NoiseKey comment says: each value agrees with the
// independent reference to within the rounding of the reference itself
// (math.Sincos of the rounded 2π·u₂ is off by up to ~1e-15·r).
func TestStreamMatchesReference(t *testing.T) {
	const n = 1 << 12
	for _, key := range testKeys {
		got := make([]float64, 2*n)
		FillGaussianAt(got, key, 2*1000)
		for i := range n {
			j := uint32(1000 + i)
			z0, z1, u1, u2 := refNormals(key, j)
			tol := 4e-15 * math.Max(1, math.Sqrt(-2*math.Log(u1)))
			if math.Abs(got[2*i]-z0) > tol || math.Abs(got[2*i+1]-z1) > tol {
				t.Fatalf("key %+v block %d: got (%v, %v), reference (%v, %v)", key, j, got[2*i], got[2*i+1], z0, z1)
			}
			if g0, g1 := key.Normal(2*uint64(j)), key.Normal(2*uint64(j)+1); g0 != got[2*i] || g1 != got[2*i+1] {
				t.Fatalf("key %+v block %d: Normal gives (%v, %v), FillGaussianAt (%v, %v)", key, j, g0, g1, got[2*i], got[2*i+1])
			}
			if gu1, gu2 := key.Uniforms(j); gu1 != u1 || gu2 != u2 {
				t.Fatalf("key %+v block %d: Uniforms (%v, %v), want (%v, %v)", key, j, gu1, gu2, u1, u2)
			}
		}
	}
}

// logUnit against math.Log at the ends of its domain, around the √2 split of
// the mantissa, at powers of two, and at random points of the stream's grid.
func TestLogUnit(t *testing.T) {
	xs := []float64{0x1p-53, 0x1p-52, 3 * 0x1p-53, 0.5, 1, math.Nextafter(1, 0), math.Sqrt2 / 2,
		math.Nextafter(math.Sqrt2/2, 0), math.Nextafter(math.Sqrt2/2, 1), math.Sqrt2 / 4, 0.75, 1e-10, 0.1}
	rng := rand.New(rand.NewPCG(21, 22))
	for range 100000 {
		xs = append(xs, float64(rng.Uint64N(1<<53)+1)*0x1p-53)
	}
	for e := -53; e <= 0; e++ {
		xs = append(xs, math.Ldexp(1, e), math.Ldexp(math.Sqrt2, e-1), math.Ldexp(1.9999999, e-1))
	}
	for _, x := range xs {
		got, want := logUnit(x), math.Log(x)
		if d := math.Abs(got - want); d > ulp(want) {
			t.Errorf("logUnit(%v) = %v, math.Log = %v (diff %.3g ulp)", x, got, want, d/ulp(want))
		}
	}
}

// sinCos2Pi against math.Sincos at every octant boundary and its neighbours,
// and at random points. 2π·u is exact to 0.5 ulp ≤ 4.5e-16 in the reference,
// which bounds the difference together with the two functions' own ulp.
func TestSinCos2Pi(t *testing.T) {
	ms := []uint64{0, 1, 1<<53 - 1}
	for o := uint64(0); o <= 8; o++ {
		b := o << 50
		for _, d := range []int64{-2, -1, 0, 1, 2} {
			if m := int64(b) + d; m >= 0 && m < 1<<53 {
				ms = append(ms, uint64(m))
			}
		}
	}
	rng := rand.New(rand.NewPCG(23, 24))
	for range 100000 {
		ms = append(ms, rng.Uint64N(1<<53))
	}
	for _, m := range ms {
		s, c := sinCos2Pi(m)
		ws, wc := math.Sincos(2 * math.Pi * float64(m) * 0x1p-53)
		if math.Abs(s-ws) > 1e-15 || math.Abs(c-wc) > 1e-15 {
			t.Fatalf("sinCos2Pi(%d): (%v, %v), math.Sincos: (%v, %v)", m, s, c, ws, wc)
		}
		if h := s*s + c*c; math.Abs(h-1) > 1e-15 {
			t.Fatalf("sinCos2Pi(%d): sin²+cos² = %v", m, h)
		}
	}
	// Exact values at the quarter turns.
	for q, want := range [][2]float64{{0, 1}, {1, 0}, {0, -1}, {-1, 0}} {
		s, c := sinCos2Pi(uint64(q) << 51)
		if s != want[0] || c != want[1] {
			t.Errorf("quarter %d: (%v, %v), want %v", q, s, c, want)
		}
	}
}

func ulp(x float64) float64 {
	x = math.Abs(x)
	return math.Nextafter(x, math.Inf(1)) - x
}

// Moments of a long stream against N(0, 1): mean, variance, skewness and
// excess kurtosis within 5 standard errors.
func TestGaussianMoments(t *testing.T) {
	n := 1 << 20
	if testing.Short() {
		n = 1 << 17
	}
	z := make([]float64, n)
	for _, key := range testKeys[1:3] {
		FillGaussian(z, key)
		mean, sd := stat.MeanStdDev(z, nil)
		se := 1 / math.Sqrt(float64(n))
		checks := []struct {
			name      string
			got, want float64
			stderr    float64
		}{
			{"mean", mean, 0, se},
			{"variance", sd * sd, 1, math.Sqrt2 * se},
			{"skewness", stat.Skew(z, nil), 0, math.Sqrt(6) * se},
			{"excess kurtosis", stat.ExKurtosis(z, nil), 0, math.Sqrt(24) * se},
		}
		for _, c := range checks {
			if math.Abs(c.got-c.want) > 5*c.stderr {
				t.Errorf("key %+v: %s = %.5f, want %g ± %.5f", key, c.name, c.got, c.want, 5*c.stderr)
			}
		}
	}
}

// ksStat is the Kolmogorov–Smirnov distance between the sample x (sorted in
// place) and the continuous CDF.
func ksStat(x []float64, cdf func(float64) float64) float64 {
	slices.Sort(x)
	n := float64(len(x))
	d := 0.0
	for i, v := range x {
		f := cdf(v)
		d = math.Max(d, math.Max(float64(i+1)/n-f, f-float64(i)/n))
	}
	return d
}

// ksCritical is the asymptotic KS critical value at level α = 10⁻⁴
// (√(−ln(α/2)/2) / √n).
func ksCritical(n int) float64 { return math.Sqrt(-math.Log(1e-4/2)/2) / math.Sqrt(float64(n)) }

// Kolmogorov–Smirnov tests of the normals against Φ (gonum distuv), of their
// squares against χ²(1), and of the two uniforms against U(0, 1).
func TestGaussianKS(t *testing.T) {
	n := 1 << 18
	if testing.Short() {
		n = 1 << 15
	}
	norm := distuv.UnitNormal
	chi2 := distuv.ChiSquared{K: 1}
	for _, key := range testKeys {
		z := make([]float64, n)
		FillGaussianAt(z, key, 12345)
		sq := make([]float64, n)
		for i, v := range z {
			sq[i] = v * v
		}
		if d := ksStat(z, norm.CDF); d > ksCritical(n) {
			t.Errorf("key %+v: KS distance to N(0,1) %.5f > %.5f", key, d, ksCritical(n))
		}
		if d := ksStat(sq, chi2.CDF); d > ksCritical(n) {
			t.Errorf("key %+v: KS distance of z² to χ²(1) %.5f > %.5f", key, d, ksCritical(n))
		}
		u1, u2 := make([]float64, n/2), make([]float64, n/2)
		for j := range u1 {
			u1[j], u2[j] = key.Uniforms(uint32(j))
			if !(u1[j] > 0 && u1[j] <= 1 && u2[j] >= 0 && u2[j] < 1) {
				t.Fatalf("key %+v block %d: uniforms (%v, %v) out of range", key, j, u1[j], u2[j])
			}
		}
		unif := func(x float64) float64 { return math.Min(math.Max(x, 0), 1) }
		if d := ksStat(u1, unif); d > ksCritical(n/2) {
			t.Errorf("key %+v: KS distance of u1 to U(0,1) %.5f", key, d)
		}
		if d := ksStat(u2, unif); d > ksCritical(n/2) {
			t.Errorf("key %+v: KS distance of u2 to U(0,1) %.5f", key, d)
		}
	}
}

// Streams of keys that differ in one field (low or high half) are different
// and uncorrelated; so are the two normals of one block (also in their
// squares, which Box–Muller makes independent) and neighbouring values.
func TestStreamsIndependent(t *testing.T) {
	const n = 1 << 16
	base := NoiseKey{Seed: 42, Step: 1000, Tensor: 3}
	variants := []NoiseKey{
		{Seed: 43, Step: 1000, Tensor: 3},
		{Seed: 42 | 1<<32, Step: 1000, Tensor: 3},
		{Seed: 42, Step: 1001, Tensor: 3},
		{Seed: 42, Step: 1000 | 1<<40, Tensor: 3},
		{Seed: 42, Step: 1000, Tensor: 4},
		{Seed: 42, Step: 1000, Tensor: 3 | 1<<31},
		{Seed: 1000, Step: 42, Tensor: 3}, // swapped fields
	}
	zb := make([]float64, n)
	FillGaussian(zb, base)
	lim := 5 / math.Sqrt(n)
	for _, v := range variants {
		zv := make([]float64, n)
		FillGaussian(zv, v)
		same := 0
		for i := range zv {
			if zv[i] == zb[i] {
				same++
			}
		}
		if same > 0 {
			t.Errorf("key %+v shares %d values with %+v", v, same, base)
		}
		if r := stat.Correlation(zb, zv, nil); math.Abs(r) > lim {
			t.Errorf("key %+v: correlation with %+v = %.4f, |r| should be < %.4f", v, base, r, lim)
		}
		// Shifted by one value: catches a stream that is a shifted copy.
		if r := stat.Correlation(zb[1:], zv[:n-1], nil); math.Abs(r) > lim {
			t.Errorf("key %+v: lag-1 cross-correlation %.4f", v, r)
		}
	}
	even, odd := make([]float64, n/2), make([]float64, n/2)
	for i := range even {
		even[i], odd[i] = zb[2*i], zb[2*i+1]
	}
	lim2 := 5 / math.Sqrt(n/2)
	if r := stat.Correlation(even, odd, nil); math.Abs(r) > lim2 {
		t.Errorf("within-block correlation %.4f", r)
	}
	for i := range even {
		even[i], odd[i] = even[i]*even[i], odd[i]*odd[i]
	}
	if r := stat.Correlation(even, odd, nil); math.Abs(r) > lim2 {
		t.Errorf("within-block correlation of squares %.4f", r)
	}
	if r := stat.Correlation(zb[1:n-1:n-1], zb[2:], nil); math.Abs(r) > lim {
		t.Errorf("lag-1 autocorrelation %.4f", r)
	}
}

// stdAdd is the documented element-wise meaning of AddGaussian.
func stdAdd[T Float](d T, std, z float64) T { return T(math.FMA(std, z, float64(d))) }

// lengths exercise the head (odd offset), the vector groups of eight blocks,
// the scalar tail, the 512-value buffer passes and the parallel split.
var testLengths = []int{0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 127, 128, 129, 511, 512, 513, 1023, 1025,
	parMin - 1, parMin, parMin + 1, 3*parMin + 5, 100003}

func checkAddElementwise[T Float](t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	key := NoiseKey{Seed: 9, Step: 8, Tensor: 7}
	for _, n := range testLengths {
		for _, off := range []uint64{0, 1, 2, 1001} {
			d0 := make([]T, n)
			for i := range d0 {
				d0[i] = T(rng.NormFloat64())
			}
			d := slices.Clone(d0)
			AddGaussianAt(d, 0.7, key, off)
			f := make([]T, n)
			FillGaussianAt(f, key, off)
			for i := range d {
				z := key.Normal(off + uint64(i))
				if want := stdAdd(d0[i], 0.7, z); d[i] != want {
					t.Fatalf("n=%d off=%d: AddGaussianAt[%d] = %v, element-wise %v", n, off, i, d[i], want)
				}
				if f[i] != T(z) {
					t.Fatalf("n=%d off=%d: FillGaussianAt[%d] = %v, Normal %v", n, off, i, f[i], T(z))
				}
			}
			if off == 0 {
				d2 := slices.Clone(d0)
				AddGaussian(d2, 0.7, key)
				if !slices.Equal(d2, d) {
					t.Fatalf("n=%d: AddGaussian differs from AddGaussianAt(…, 0)", n)
				}
			}
		}
	}
}

func TestAddGaussianElementwise(t *testing.T) {
	t.Run("float64", checkAddElementwise[float64])
	t.Run("float32", checkAddElementwise[float32])
}

// supportedKernels lists the kernels this CPU runs, the pure-Go one first.
func supportedKernels() []kernel {
	var ks []kernel
	for _, k := range []kernel{kernelGo, kernelAVX2, kernelAVX512} {
		if kernelSupported(k) {
			ks = append(ks, k)
		}
	}
	return ks
}

// kernelNames name the kernels in test messages and benchmarks.
var kernelNames = map[kernel]string{kernelGo: "go", kernelAVX2: "avx2", kernelAVX512: "avx512"}

// checkKernelsAgree checks that every kernel gives the pure-Go kernel's values
// bit for bit in the window [off, off+n) of key's stream, through
// FillGaussianAt's and AddGaussianAt's path, in float64 and float32.
func checkKernelsAgree(t *testing.T, key NoiseKey, off uint64, n int, std float64) {
	t.Helper()
	want := make([]float64, n)
	gaussianWith(kernelGo, want, 0, key, off, true)
	base := make([]float32, n)
	for i := range base {
		base[i] = float32(i%7) - 3
	}
	want32 := slices.Clone(base)
	gaussianWith(kernelGo, want32, std, key, off, false)
	for _, k := range supportedKernels()[1:] {
		got := make([]float64, n)
		gaussianWith(k, got, 0, key, off, true)
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Fatalf("%s: key %+v window [%d, %d): value %d is %v, pure Go %v", kernelNames[k], key, off, off+uint64(n), off+uint64(i), got[i], want[i])
			}
		}
		got32 := slices.Clone(base)
		gaussianWith(k, got32, std, key, off, false)
		for i := range got32 {
			if math.Float32bits(got32[i]) != math.Float32bits(want32[i]) {
				t.Fatalf("%s: key %+v window [%d, %d): float32 Add at %d gives %v, pure Go %v", kernelNames[k], key, off, off+uint64(n), off+uint64(i), got32[i], want32[i])
			}
		}
	}
}

// Every kernel gives the pure-Go values bit for bit: windows of every
// length 0…1000 at random even and odd offsets, random keys, windows that
// end at the end of the stream, and long windows split over goroutines.
func TestGaussianKernelsAgree(t *testing.T) {
	if len(supportedKernels()) < 2 {
		t.Skip("only the pure-Go kernel runs here")
	}
	rng := rand.New(rand.NewPCG(61, 62))
	for n := 0; n <= 1000; n++ {
		key := NoiseKey{Seed: rng.Uint64(), Step: rng.Uint64(), Tensor: rng.Uint32()}
		off := rng.Uint64N(1 << 20)
		if n%5 == 0 {
			off = MaxStreamLen - uint64(n) - rng.Uint64N(4)
		}
		checkKernelsAgree(t, key, off, n, 0.5+rng.Float64())
	}
	for _, n := range []int{parMin + 1, 3*parMin + 5, 100003} {
		key := NoiseKey{Seed: rng.Uint64(), Step: rng.Uint64(), Tensor: rng.Uint32()}
		checkKernelsAgree(t, key, rng.Uint64N(MaxStreamLen-uint64(n)), n, 1.3)
	}
}

// FuzzGaussianKernels checks, for fuzzed keys and windows, that every kernel
// gives the pure-Go values bit for bit.
func FuzzGaussianKernels(f *testing.F) {
	f.Add(uint64(0), uint64(0), uint32(0), uint64(0), uint16(17))
	f.Add(uint64(1), uint64(2), uint32(3), uint64(MaxStreamLen-5), uint16(5))
	f.Add(^uint64(0), ^uint64(0), ^uint32(0), uint64(12345), uint16(1000))
	f.Fuzz(func(t *testing.T, seed, step uint64, tensor uint32, off uint64, n uint16) {
		size := int(n % 2048)
		off %= MaxStreamLen - uint64(size) + 1
		checkKernelsAgree(t, NoiseKey{Seed: seed, Step: step, Tensor: tensor}, off, size, 0.75)
	})
}

// The result does not depend on how a tensor is cut into windows, on the
// number of goroutines that noise the windows concurrently, nor on
// GOMAXPROCS.
func TestAddGaussianChunkingInvariance(t *testing.T) {
	checkChunkingInvariance(t, AddGaussianAt[float32], 41)
}

// checkChunkingInvariance checks that addAt (an Add…At noise kernel) gives the
// same tensor in one call, under GOMAXPROCS(1), and cut at random points into
// windows noised concurrently.
func checkChunkingInvariance(t *testing.T, addAt func([]float32, float64, NoiseKey, uint64), seed uint64) {
	t.Helper()
	const n = 5*parMin + 77
	key := NoiseKey{Seed: 5, Step: 6, Tensor: 2}
	want := make([]float32, n)
	addAt(want, 1.3, key, 0)

	prev := runtime.GOMAXPROCS(1)
	one := make([]float32, n)
	addAt(one, 1.3, key, 0)
	runtime.GOMAXPROCS(prev)
	if !slices.Equal(one, want) {
		t.Fatal("GOMAXPROCS(1) result differs")
	}

	rng := rand.New(rand.NewPCG(seed, seed+1))
	for trial := range 10 {
		cuts := []int{0, n}
		for range 1 + rng.IntN(12) {
			cuts = append(cuts, rng.IntN(n))
		}
		slices.Sort(cuts)
		got := make([]float32, n)
		var wg sync.WaitGroup
		for c := range len(cuts) - 1 {
			lo, hi := cuts[c], cuts[c+1]
			wg.Go(func() { addAt(got[lo:hi], 1.3, key, uint64(lo)) })
		}
		wg.Wait()
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: cuts %v give a different result", trial, cuts)
		}
	}
}

// float32 results are the float64 results rounded once.
func TestFloat32MatchesFloat64(t *testing.T) {
	const n = 3*parMin + 11
	key := NoiseKey{Seed: 77, Step: 1, Tensor: 1}
	f64 := make([]float64, n)
	f32 := make([]float32, n)
	FillGaussian(f64, key)
	FillGaussian(f32, key)
	for i := range f64 {
		if f32[i] != float32(f64[i]) {
			t.Fatalf("Fill [%d]: float32 %v, float64 %v", i, f32[i], f64[i])
		}
	}
	rng := rand.New(rand.NewPCG(51, 52))
	a32 := make([]float32, n)
	a64 := make([]float64, n)
	for i := range a32 {
		a32[i] = float32(rng.NormFloat64())
		a64[i] = float64(a32[i])
	}
	AddGaussian(a32, 2.5, key)
	AddGaussian(a64, 2.5, key)
	for i := range a64 {
		if a32[i] != float32(a64[i]) {
			t.Fatalf("Add [%d]: float32 %v, float64 %v", i, a32[i], a64[i])
		}
	}
}

type namedFloat32 float32

// Element types defined on float32 or float64 work like the base types.
func TestNamedElementType(t *testing.T) {
	key := NoiseKey{Seed: 3}
	a := make([]namedFloat32, 1000)
	b := make([]float32, 1000)
	FillGaussian(a, key)
	FillGaussian(b, key)
	for i := range a {
		if float32(a[i]) != b[i] {
			t.Fatalf("[%d]: %v vs %v", i, a[i], b[i])
		}
	}
}

// The last block of a stream is usable; one value past it panics, as do a
// non-finite std and an out-of-range Normal index.
func TestStreamBounds(t *testing.T) {
	key := NoiseKey{Seed: 1, Step: 2, Tensor: 3}
	d := make([]float64, 2)
	FillGaussianAt(d, key, MaxStreamLen-2)
	z0, z1, _, _ := refNormals(key, ^uint32(0))
	if math.Abs(d[0]-z0) > 1e-13 || math.Abs(d[1]-z1) > 1e-13 {
		t.Errorf("last block: %v, reference (%v, %v)", d, z0, z1)
	}
	mustPanic(t, "window past the end", func() { FillGaussianAt(d, key, MaxStreamLen-1) })
	mustPanic(t, "offset past the end", func() { FillGaussianAt(d[:0], key, MaxStreamLen+1) })
	mustPanic(t, "NaN std", func() { AddGaussian(d, math.NaN(), key) })
	mustPanic(t, "Inf std", func() { AddGaussian(d, math.Inf(1), key) })
	mustPanic(t, "Normal index", func() { key.Normal(MaxStreamLen) })
	// std = 0 adds nothing; a negative std mirrors the noise.
	a := []float64{1, 2, 3}
	AddGaussian(a, 0, key)
	if !slices.Equal(a, []float64{1, 2, 3}) {
		t.Errorf("std 0 changed the data: %v", a)
	}
	a, b := make([]float64, 3), make([]float64, 3)
	AddGaussian(a, 2, key)
	AddGaussian(b, -2, key)
	for i := range a {
		if a[i] != -b[i] {
			t.Errorf("std −2 is not the mirror of std 2 at %d: %v %v", i, a[i], b[i])
		}
	}
}

func mustPanic(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", name)
		}
	}()
	f()
}
