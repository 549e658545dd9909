package kernels

import (
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"gonum.org/v1/gonum/stat"
)

// expBig returns eˣ rounded to float64, from a 256-bit evaluation: the
// Taylor series of e^{x/2¹⁰}, squared ten times.
func expBig(x float64) float64 {
	const prec = 256
	y := new(big.Float).SetPrec(prec).SetMantExp(big.NewFloat(x), -10)
	sum := new(big.Float).SetPrec(prec).SetInt64(1)
	term := new(big.Float).SetPrec(prec).SetInt64(1)
	for k := int64(1); k <= 40; k++ {
		term.Mul(term, y)
		term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(k))
		sum.Add(sum, term)
	}
	for range 10 {
		sum.Mul(sum, sum)
	}
	f, _ := sum.Float64()
	return f
}

// expNeg against a 256-bit evaluation (within 1 ulp, as FreeBSD's e_exp.c
// promises) and against math.Exp (within 2 ulp: on amd64 math.Exp is an
// assembly kernel with its own error), on its whole domain, at the ends and
// around the switching points of k (x = −(k + ½)·ln 2).
func TestExpNeg(t *testing.T) {
	lo := -53 * math.Ln2
	xs := []float64{0, math.Copysign(0, -1), -1e-300, -0x1p-60, lo, math.Nextafter(lo, 0), -1, -0.5, -math.Ln2}
	for k := 0; k <= 53; k++ {
		x := -(float64(k) + 0.5) * math.Ln2
		xs = append(xs, x, math.Nextafter(x, 0), math.Nextafter(x, -1), -float64(k)*math.Ln2)
	}
	rng := rand.New(rand.NewPCG(101, 102))
	for range 3000 {
		xs = append(xs, lo*rng.Float64())
	}
	for _, x := range xs {
		if x < lo {
			continue
		}
		got, want := expNeg(x), expBig(x)
		if d := math.Abs(got - want); d > ulp(want) {
			t.Errorf("expNeg(%v) = %v, 256-bit %v (diff %.3g ulp)", x, got, want, d/ulp(want))
		}
		if d := math.Abs(got - math.Exp(x)); d > 2*ulp(want) {
			t.Errorf("expNeg(%v) = %v, math.Exp %v (diff %.3g ulp)", x, got, math.Exp(x), d/ulp(want))
		}
	}
	if expNeg(0) != 1 || expNeg(-math.Ln2) != 0.5 {
		t.Errorf("expNeg(0) = %v, expNeg(−ln 2) = %v", expNeg(0), expNeg(-math.Ln2))
	}
}

// refBallScale is an independent evaluation of the scale documented at
// AddBall: the normals of refNormals (math.Log, math.Sincos), their squares
// summed in plain order, U from the Philox words of the reserved stream, and
// ρ = math.Pow(U, 1/d).
func refBallScale(lens []int, radius float64, key NoiseKey) (c, sq float64) {
	d := 0
	for p, n := range lens {
		kp := NoiseKey{Seed: key.Seed, Step: key.Step, Tensor: key.Tensor + uint32(p)}
		for j := 0; 2*j < n; j++ {
			z0, z1, _, _ := refNormals(kp, uint32(j))
			sq += z0 * z0
			if 2*j+1 < n {
				sq += z1 * z1
			}
		}
		d += n
	}
	w := Philox4x32([4]uint32{key.Tensor, 0xFFFFFFFF, uint32(key.Step), uint32(key.Step >> 32)},
		[2]uint32{uint32(key.Seed), uint32(key.Seed >> 32)})
	u := (float64((uint64(w[0])<<32|uint64(w[1]))>>11) + 1) / (1 << 53)
	return radius * math.Pow(u, 1/float64(d)) / math.Sqrt(sq), sq
}

func toU64(lens []int) []uint64 {
	out := make([]uint64, len(lens))
	for i, n := range lens {
		out[i] = uint64(n)
	}
	return out
}

var ballTestLens = [][]int{{1}, {2}, {3}, {2, 5, 0, 7}, {0, 1}, {33, 1}, {5000, 3, 9001}, {ballChunk}, {ballChunk + 1, ballChunk - 1}, {3*ballChunk + 17}}

// The scale c = (radius·ρ)/‖g‖ agrees with the independent reference to
// rounding, for tensor lists that exercise the chunking, odd lengths, empty
// tensors and the vector path.
func TestBallScaleMatchesReference(t *testing.T) {
	for _, lens := range ballTestLens {
		for _, key := range testKeys[:3] {
			got := ballScale(toU64(lens), 1.7, key)
			want, _ := refBallScale(lens, 1.7, key)
			if math.Abs(got-want) > 1e-13*want {
				t.Errorf("lens %v key %+v: scale %v, reference %v (rel %.3g)", lens, key, got, want, math.Abs(got-want)/want)
			}
		}
	}
}

// ballSqNormDoc re-evaluates ‖g‖² block by block, in exactly the order the
// AddBall comment documents, without the AVX2 kernels or goroutines.
func ballSqNormDoc(lens []int, key NoiseKey) float64 {
	total := 0.0
	for p, n := range lens {
		kp := NoiseKey{Seed: key.Seed, Step: key.Step, Tensor: key.Tensor + uint32(p)}
		for start := 0; start < n; start += ballChunk {
			m := min(ballChunk, n-start)
			var s [4]float64
			for b := 0; 2*b < m; b++ {
				u1, _ := kp.Uniforms(uint32(start/2 + b))
				if 2*b+1 < m {
					r := math.Sqrt(-2 * logUnit(u1))
					s[b%4] += float64(r * r)
				} else {
					z := kp.Normal(uint64(start + 2*b))
					s[b%4] += float64(z * z)
				}
			}
			total += (s[0] + s[1]) + (s[2] + s[3])
		}
	}
	return total
}

// ‖g‖² is summed in the documented order, bit for bit, whatever the number
// of goroutines.
func TestBallSqNormOrder(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	for _, lens := range ballTestLens {
		key := NoiseKey{Seed: 11, Step: 12, Tensor: 13}
		want := ballSqNormDoc(lens, key)
		for _, procs := range []int{1, 2, 5} {
			runtime.GOMAXPROCS(procs)
			if got := ballSqNorm(toU64(lens), key); got != want {
				t.Errorf("lens %v GOMAXPROCS %d: ‖g‖² = %v, documented order %v", lens, procs, got, want)
			}
		}
		runtime.GOMAXPROCS(prev)
		if _, sq := refBallScale(lens, 1, key); math.Abs(sq-want) > 1e-13*sq {
			t.Errorf("lens %v: ‖g‖² = %v, Σz² = %v", lens, want, sq)
		}
	}
}

// Each element is T(FMA(c, z, float64(dst[k]))) with z the Gaussian stream
// of tensor p under Tensor = key.Tensor + p: AddGaussian with std c.
func checkBallElementwise[T Float](t *testing.T) {
	rng := rand.New(rand.NewPCG(111, 112))
	for _, lens := range ballTestLens {
		key := NoiseKey{Seed: 21, Step: 22, Tensor: 23}
		c := ballScale(toU64(lens), 0.9, key)
		d0 := make([][]T, len(lens))
		d := make([][]T, len(lens))
		for p, n := range lens {
			d0[p] = make([]T, n)
			for i := range d0[p] {
				d0[p][i] = T(rng.NormFloat64())
			}
			d[p] = slices.Clone(d0[p])
		}
		AddBall(d, 0.9, key)
		for p := range lens {
			kp := NoiseKey{Seed: 21, Step: 22, Tensor: 23 + uint32(p)}
			for i := range d[p] {
				if want := stdAdd(d0[p][i], c, kp.Normal(uint64(i))); d[p][i] != want {
					t.Fatalf("lens %v tensor %d [%d]: %v, element-wise %v", lens, p, i, d[p][i], want)
				}
			}
		}
	}
}

func TestAddBallElementwise(t *testing.T) {
	t.Run("float64", checkBallElementwise[float64])
	t.Run("float32", checkBallElementwise[float32])
}

// ballDraws returns N draws of ball noise of the given radius on zero tensors
// of the given lengths, flattened, one key (Step) per draw.
func ballDraws(lens []int, radius float64, draws int, seed uint64) [][]float64 {
	out := make([][]float64, draws)
	for s := range out {
		ts := make([][]float64, len(lens))
		for p, n := range lens {
			ts[p] = make([]float64, n)
		}
		AddBall(ts, radius, NoiseKey{Seed: seed, Step: uint64(s), Tensor: 5})
		out[s] = slices.Concat(ts...)
	}
	return out
}

// The radius law of the uniform ball: P(‖n‖ ≤ r·t) = t^d, so (‖n‖/r)^d is
// Uniform(0, 1); a Kolmogorov–Smirnov test over many keys, for d from 1 to
// 1000, with the vector split over several tensors. Every draw lies in the
// ball.
func TestBallRadiusLaw(t *testing.T) {
	const radius = 3.0
	cases := []struct {
		lens  []int
		draws int
	}{
		{[]int{1}, 20000}, {[]int{2}, 20000}, {[]int{1, 2}, 20000},
		{[]int{3, 0, 7}, 20000}, {[]int{600, 400}, 3000},
	}
	for _, c := range cases {
		draws := c.draws
		if testing.Short() {
			draws /= 4
		}
		d := 0
		for _, n := range c.lens {
			d += n
		}
		tv := make([]float64, draws)
		for s, n := range ballDraws(c.lens, radius, draws, 7) {
			norm := math.Sqrt(stat.Mean(sqr(n), nil) * float64(d))
			if norm > radius*(1+1e-14) {
				t.Fatalf("d=%d draw %d: ‖n‖ = %v > r", d, s, norm)
			}
			tv[s] = math.Pow(norm/radius, float64(d))
		}
		unif := func(x float64) float64 { return math.Min(math.Max(x, 0), 1) }
		if ks := ksStat(tv, unif); ks > ksCritical(draws) {
			t.Errorf("d=%d: KS distance of (‖n‖/r)^d to U(0,1) %.5f > %.5f", d, ks, ksCritical(draws))
		}
	}
}

func sqr(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * v
	}
	return out
}

// Isotropy: every coordinate has mean 0, E[nᵢnⱼ] = r²/(d+2)·δᵢⱼ, for small d
// and vectors split over tensors, within 5 standard errors estimated from
// the sample.
func TestBallIsotropy(t *testing.T) {
	const radius = 2.0
	draws := 40000
	if testing.Short() {
		draws = 10000
	}
	for _, lens := range [][]int{{2}, {1, 2}, {1, 1, 3}} {
		n := ballDraws(lens, radius, draws, 8)
		d := len(n[0])
		want := radius * radius / float64(d+2)
		col := make([]float64, draws)
		for i := range d {
			for j := i; j < d; j++ {
				for s := range n {
					col[s] = n[s][i] * n[s][j]
				}
				m, sd := stat.MeanStdDev(col, nil)
				w := 0.0
				if i == j {
					w = want
				}
				if se := sd / math.Sqrt(float64(draws)); math.Abs(m-w) > 5*se {
					t.Errorf("lens %v: E[n%d n%d] = %.5f, want %.5f ± %.5f", lens, i, j, m, w, 5*se)
				}
			}
			for s := range n {
				col[s] = n[s][i]
			}
			m, sd := stat.MeanStdDev(col, nil)
			if se := sd / math.Sqrt(float64(draws)); math.Abs(m) > 5*se {
				t.Errorf("lens %v: E[n%d] = %.5f, want 0 ± %.5f", lens, i, m, 5*se)
			}
		}
	}
}

// d = 1: the noise is uniform on [−r, r].
func TestBallOneDimUniform(t *testing.T) {
	const radius = 0.5
	draws := 20000
	if testing.Short() {
		draws = 5000
	}
	x := make([]float64, draws)
	for s, n := range ballDraws([]int{1}, radius, draws, 9) {
		x[s] = n[0]
	}
	cdf := func(v float64) float64 { return math.Min(math.Max((v+radius)/(2*radius), 0), 1) }
	if ks := ksStat(x, cdf); ks > ksCritical(draws) {
		t.Errorf("KS distance to U(−r, r) %.5f > %.5f", ks, ksCritical(draws))
	}
}

// Tensor p's direction is the Gaussian stream of Tensor = key.Tensor + p, so
// a call whose first tensor is t+1 has, on its first tensor, a multiple of the
// second tensor of a call that starts at t; calls with different first
// tensors draw different radii; and the noise is reproducible.
func TestBallTensorStreams(t *testing.T) {
	key := NoiseKey{Seed: 31, Step: 32, Tensor: 10}
	a := [][]float64{make([]float64, 4), make([]float64, 6)}
	AddBall(a, 1, key)
	next := key
	next.Tensor++
	b := [][]float64{make([]float64, 6)}
	AddBall(b, 1, next)
	ratio := a[1][0] / b[0][0]
	for i := range b[0] {
		if r := a[1][i] / b[0][i]; math.Abs(r-ratio) > 1e-14*math.Abs(ratio) {
			t.Fatalf("[%d]: ratio %v, first ratio %v", i, r, ratio)
		}
	}
	if ballUniform(key) == ballUniform(next) {
		t.Error("different first tensors give the same radius uniform")
	}
	// Direction = normalized Gaussian stream.
	z := make([]float64, 0, 10)
	for p, n := range []int{4, 6} {
		kp := NoiseKey{Seed: 31, Step: 32, Tensor: 10 + uint32(p)}
		for i := range n {
			z = append(z, kp.Normal(uint64(i)))
		}
	}
	flat := slices.Concat(a...)
	zn := math.Sqrt(stat.Mean(sqr(z), nil) * 10)
	nn := math.Sqrt(stat.Mean(sqr(flat), nil) * 10)
	for i := range z {
		if math.Abs(flat[i]/nn-z[i]/zn) > 1e-15 {
			t.Fatalf("[%d]: direction %v, stream %v", i, flat[i]/nn, z[i]/zn)
		}
	}
	// The noise norm is radius·U^{1/d}.
	if want := math.Pow(ballUniform(key), 0.1); math.Abs(nn-want) > 1e-14 {
		t.Errorf("‖n‖ = %v, U^{1/d} = %v", nn, want)
	}
	again := [][]float64{make([]float64, 4), make([]float64, 6)}
	AddBall(again, 1, key)
	for p := range a {
		if !slices.Equal(a[p], again[p]) {
			t.Fatal("second call differs")
		}
	}
}

// The result does not depend on GOMAXPROCS, float32 tensors get the float64
// results rounded once, and a long vector (parallel norm pass) matches the
// reference scale.
func TestBallParallelInvariance(t *testing.T) {
	lens := []int{3*parMin + 5, 7, 2 * ballChunk}
	key := NoiseKey{Seed: 41, Step: 42, Tensor: 43}
	mk := func() [][]float64 {
		ts := make([][]float64, len(lens))
		for p, n := range lens {
			ts[p] = make([]float64, n)
			for i := range ts[p] {
				ts[p][i] = float64(i%7) - 3
			}
		}
		return ts
	}
	want := mk()
	AddBall(want, 2.5, key)
	prev := runtime.GOMAXPROCS(1)
	one := mk()
	AddBall(one, 2.5, key)
	runtime.GOMAXPROCS(prev)
	for p := range want {
		if !slices.Equal(one[p], want[p]) {
			t.Fatalf("tensor %d: GOMAXPROCS(1) result differs", p)
		}
	}
	f32 := make([][]float32, len(lens))
	for p, n := range lens {
		f32[p] = make([]float32, n)
		for i := range f32[p] {
			f32[p][i] = float32(i%7) - 3
		}
	}
	AddBall(f32, 2.5, key)
	for p := range f32 {
		for i := range f32[p] {
			if f32[p][i] != float32(want[p][i]) {
				t.Fatalf("tensor %d [%d]: float32 %v, float64 %v", p, i, f32[p][i], want[p][i])
			}
		}
	}
	got := ballScale(toU64(lens), 2.5, key)
	if ref, _ := refBallScale(lens, 2.5, key); math.Abs(got-ref) > 1e-13*ref {
		t.Errorf("scale %v, reference %v", got, ref)
	}
}

// Empty input does nothing, radius 0 changes nothing, and bad radii or tensor
// ids that reach BallRadiusTensor panic.
func TestBallBounds(t *testing.T) {
	key := NoiseKey{Seed: 1, Step: 2, Tensor: 3}
	AddBall[float64](nil, 1, key)
	empty := [][]float32{{}, {}}
	AddBall(empty, 1, key)
	a := [][]float64{{1, 2, 3}, {4}}
	AddBall(a, 0, key)
	if !slices.Equal(a[0], []float64{1, 2, 3}) || a[1][0] != 4 {
		t.Errorf("radius 0 changed the data: %v", a)
	}
	for _, r := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, math.Nextafter(MaxBallRadius, math.Inf(1))} {
		mustPanic(t, "radius", func() { AddBall(a, r, key) })
	}
	AddBall(a, MaxBallRadius, key) // the largest radius is accepted and gives finite noise
	for _, v := range slices.Concat(a...) {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			t.Errorf("radius MaxBallRadius: %v", a)
		}
	}
	high := NoiseKey{Tensor: BallRadiusTensor - 1}
	AddBall([][]float64{{0}}, 1, high) // the last usable id
	mustPanic(t, "ids reach BallRadiusTensor", func() { AddBall([][]float64{{0}, {0}}, 1, high) })
	mustPanic(t, "id BallRadiusTensor", func() { AddBall([][]float64{{}}, 1, NoiseKey{Tensor: BallRadiusTensor}) })
}
