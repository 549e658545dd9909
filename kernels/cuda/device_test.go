package cuda_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	drv "github.com/dpsgd/dpsgd/cuda"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
)

// The tests of this file run every kernel of dpsgd.cu through the device layer (package
// cuda) on the fake driver, against the CPU kernel it reproduces.

func randF32(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

func relClose(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(1e-30, math.Max(math.Abs(a), math.Abs(b)))
}

func TestNormsClipScaleAgainstCPU(t *testing.T) {
	d := openFake(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const b, din, h = 37, 300, 20
	a := randF32(rng, b*din, 1)
	e := randF32(rng, b*h, 0.3)
	a[5*din+7] = float32(math.NaN()) // a non-finite row: coef 0, contributes nothing
	e[9*h+1] = float32(math.Inf(1))
	mask := make([]float64, b)
	for i := range mask {
		if i < b-4 {
			mask[i] = 1
		}
	}
	// CPU reference.
	asq, esq, norm2, coef := make([]float64, b), make([]float64, b), make([]float64, b), make([]float64, b)
	kernels.RowSqNorms(asq, a, b, din)
	kernels.RowSqNorms(esq, e, b, h)
	kernels.GhostAccum(norm2, asq, esq, true)
	const clip = 4.0
	nf := kernels.ClipCoefs(coef, norm2, mask, clip)
	if nf != 2 {
		t.Fatalf("CPU nonFinite = %d", nf)
	}
	wantW, wantB := make([]float64, din*h), make([]float64, h)
	kernels.ClippedSumWide(wantW, wantB, a, e, b, din, h, coef, make([]float32, b*h), make([]float64, b*(din+h)))
	A, E, M := upload(t, d, a), upload(t, d, e), upload(t, d, mask)
	Asq, Esq, N2, C := mustAlloc(t, d, b*8), mustAlloc(t, d, b*8), mustAlloc(t, d, b*8), mustAlloc(t, d, b*8)
	if err := errors.Join(d.RowSqNorms(Asq, A, b, din), d.RowSqNorms(Esq, E, b, h), d.Zero(N2, b*8),
		d.GhostAccum(N2, Asq, Esq, b, true), d.ClipCoefs(C, N2, M, clip, b)); err != nil {
		t.Fatal(err)
	}
	gn2, gc := download[float64](t, d, N2, b), download[float64](t, d, C, b)
	for i := range b {
		finite := !math.IsNaN(norm2[i]) && !math.IsInf(norm2[i], 0)
		if finite && !relClose(gn2[i], norm2[i], 1e-12) || !finite && !(math.IsNaN(gn2[i]) || math.IsInf(gn2[i], 0)) {
			t.Fatalf("norm2[%d] = %v, CPU %v", i, gn2[i], norm2[i])
		}
		if !relClose(gc[i], coef[i], 1e-12) && !(gc[i] == 0 && coef[i] == 0) {
			t.Fatalf("coef[%d] = %v, CPU %v", i, gc[i], coef[i])
		}
	}
	// The clipped sums in float64 (ClippedSumWide, one DGEMM of the widened operands, the
	// bias out of its ones column) against kernels.ClippedSumWide, over two physical batches:
	// the second adds to the first. The products are exact in float64 on both sides, so the
	// sums differ by float64 rounding in another order only: 1e-12 relative to the larger of
	// |v| and 1e-2·max|v| (a NaN row that reached the GEMM would make them NaN).
	ACC, S := mustAlloc(t, d, (din+1)*h*8), mustAlloc(t, d, b*h*4)
	WA, WS := mustAlloc(t, d, b*(din+1)*8), mustAlloc(t, d, b*h*8)
	for pass := range 2 {
		if err := d.ClippedSumWide(ACC, A, E, b, din, h, C, S, WA, WS, pass == 0); err != nil {
			t.Fatal(err)
		}
		acc := download[float64](t, d, ACC, (din+1)*h)
		want := append(append([]float64(nil), wantW...), wantB...)
		scale := 0.0
		for _, v := range want {
			scale = math.Max(scale, math.Abs(v))
		}
		for j, w := range want {
			w *= float64(pass + 1)
			if g := acc[j]; math.IsNaN(g) || math.Abs(g-w) > 1e-12*math.Max(math.Abs(w), 1e-2*scale) {
				t.Fatalf("pass %d: clipped sum %d = %v, CPU %v", pass, j, g, w)
			}
		}
	}
	// ScaleRows alone.
	sc := append([]float32(nil), e...)
	kernels.ScaleRows(sc, b, h, coef)
	if err := d.ScaleRows(S, E, b, h, C); err != nil {
		t.Fatal(err)
	}
	gs := download[float32](t, d, S, b*h)
	for k := range gs {
		if gs[k] != sc[k] {
			t.Fatalf("ScaleRows[%d] = %v, CPU %v", k, gs[k], sc[k])
		}
	}
}

// checkClose compares float32 vectors at tol relative to the larger of each pair, with a floor
// of tol·max|want| (sums that cancel).
func checkClose(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	scale := 0.0
	for _, v := range want {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) || math.Abs(g-w) > tol*math.Max(math.Max(math.Abs(g), math.Abs(w)), scale*1e-2) {
			t.Fatalf("%s[%d] = %v, CPU %v (tol %g)", name, i, g, w, tol)
		}
	}
}

func TestGaussianSameStream(t *testing.T) {
	d := openFake(t)
	rng := rand.New(rand.NewPCG(3, 4))
	key := kernels.NoiseKey{Seed: 0xDEADBEEF12345678, Step: 1<<32 + 17, Tensor: 3}
	for _, tc := range []struct {
		n   int
		off uint64
	}{{1, 0}, {2, 0}, {1001, 0}, {777, 5}, {64, 1<<33 - 64},
		// {1 << 16, 3} holds value 5660 (stream index 5663), where x + 1.7·z cancels to
		// −5.6e−5 and exposed the mistyped (π/4)·2⁻⁵⁰ of sincos_2pi in the last bit.
		{1 << 16, 3}, {1 << 18, 0}, {4097, 1<<33 - 4097}} {
		x := randF32(rng, tc.n, 1)
		want := append([]float32(nil), x...)
		kernels.AddGaussianAt(want, 1.7, key, tc.off)
		g := upload(t, d, x)
		if err := d.AddGaussian(g, tc.n, 1.7, drv.PhiloxKey(key), tc.off); err != nil {
			t.Fatal(err)
		}
		got := download[float32](t, d, g, tc.n)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("n=%d off=%d: value %d = %v, CPU %v (must be bit-equal)", tc.n, tc.off, i, got[i], want[i])
			}
		}
		fill := make([]float32, tc.n)
		kernels.FillGaussianAt(fill, key, tc.off)
		if err := d.FillGaussian(g, tc.n, drv.PhiloxKey(key), tc.off); err != nil {
			t.Fatal(err)
		}
		got = download[float32](t, d, g, tc.n)
		for i := range got {
			if got[i] != fill[i] {
				t.Fatalf("fill n=%d off=%d: %d = %v, CPU %v", tc.n, tc.off, i, got[i], fill[i])
			}
		}
	}
	if err := d.AddGaussian(drv.Buffer{}, 1, math.NaN(), drv.PhiloxKey(key), 0); err == nil {
		t.Fatal("NaN std accepted")
	}
	if err := d.AddGaussian(mustAlloc(t, d, 8), 2, 1, drv.PhiloxKey(key), kernels.MaxStreamLen-1); err == nil {
		t.Fatal("window past MaxStreamLen accepted")
	}
}

// TestGaussianStreamBits checks the float64 stream itself (kernel gaussian_f64, no rounding
// to float32 to hide a wrong last bit) against kernels.FillGaussianAt / AddGaussianAt and,
// value by value, against kernels.NoiseKey.Normal, for several keys and windows.
func TestGaussianStreamBits(t *testing.T) {
	d := openFake(t)
	rng := rand.New(rand.NewPCG(9, 10))
	keys := []kernels.NoiseKey{
		{Seed: 0xDEADBEEF12345678, Step: 1<<32 + 17, Tensor: 3},
		{Seed: 42, Step: 9, Tensor: 1},
		{Seed: 1<<64 - 1, Step: 0, Tensor: 1<<32 - 1},
	}
	n := 1 << 18
	if testing.Short() {
		n = 1 << 15
	}
	for ki, key := range keys {
		for _, off := range []uint64{0, 5, 1<<33 - uint64(n)} {
			fill := make([]float64, n)
			kernels.FillGaussianAt(fill, key, off)
			g := mustAlloc(t, d, 8*n)
			if err := d.Launch("gaussian_f64", drv.Grid(int64(n/2+1)), g, int64(n), 0.0, drv.Buffer{}, key.Seed, key.Step, key.Tensor, off, int32(1)); err != nil {
				t.Fatal(err)
			}
			got := download[float64](t, d, g, n)
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(fill[i]) {
					t.Fatalf("key %d off %d: z_%d = %v (%#x), CPU %v (%#x)", ki, off, off+uint64(i),
						got[i], math.Float64bits(got[i]), fill[i], math.Float64bits(fill[i]))
				}
			}
			for i := 0; i < n; i += 997 {
				if z := key.Normal(off + uint64(i)); math.Float64bits(got[i]) != math.Float64bits(z) {
					t.Fatalf("key %d: z_%d = %v, NoiseKey.Normal %v", ki, off+uint64(i), got[i], z)
				}
			}
			x := make([]float64, n)
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			want := append([]float64(nil), x...)
			kernels.AddGaussianAt(want, 1.7, key, off)
			gx := upload(t, d, x)
			if err := d.Launch("gaussian_f64", drv.Grid(int64(n/2+1)), gx, int64(n), 1.7, drv.Buffer{}, key.Seed, key.Step, key.Tensor, off, int32(0)); err != nil {
				t.Fatal(err)
			}
			got = download[float64](t, d, gx, n)
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("add key %d off %d: %d = %v, CPU %v", ki, off, i, got[i], want[i])
				}
			}
			for _, b := range []drv.Buffer{g, gx} {
				if err := d.Free(b); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// The value whose float32 sum first showed the mistyped constant, by its own path.
	key := keys[0]
	g := mustAlloc(t, d, 8)
	if err := d.Launch("gaussian_f64", drv.Grid(1), g, int64(1), 0.0, drv.Buffer{}, key.Seed, key.Step, key.Tensor, uint64(5663), int32(1)); err != nil {
		t.Fatal(err)
	}
	if got, want := download[float64](t, d, g, 1)[0], key.Normal(5663); math.Float64bits(got) != math.Float64bits(want) {
		t.Fatalf("z_5663 = %v, NoiseKey.Normal %v", got, want)
	}
}

func TestLaplaceSameStream(t *testing.T) {
	d := openFake(t)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range []struct {
		key kernels.NoiseKey
		n   int
	}{
		{kernels.NoiseKey{Seed: 42, Step: 9, Tensor: 1}, 999},
		{kernels.NoiseKey{Seed: 0xDEADBEEF12345678, Step: 1<<32 + 17, Tensor: 3}, 1<<16 + 1},
		{kernels.NoiseKey{Seed: 5, Step: 1, Tensor: 0}, 1 << 18},
	} {
		x := randF32(rng, tc.n, 1e-3)
		want := append([]float32(nil), x...)
		kernels.AddLaplace(want, 0.25, tc.key)
		g := upload(t, d, x)
		if err := d.AddLaplace(g, len(x), 0.25, drv.PhiloxKey(tc.key)); err != nil {
			t.Fatal(err)
		}
		got := download[float32](t, d, g, len(x))
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("Laplace n=%d: %d = %v, CPU %v", tc.n, i, got[i], want[i])
			}
		}
		// The same stream in float64 (kernel laplace_f64), in a window at an odd offset.
		const off = 7
		x64 := make([]float64, tc.n)
		for i := range x64 {
			x64[i] = rng.NormFloat64()
		}
		want64 := append([]float64(nil), x64...)
		kernels.AddLaplaceAt(want64, 0.25, tc.key, off)
		g64 := upload(t, d, x64)
		if err := d.Launch("laplace_f64", drv.Grid(int64(tc.n/2+1)), g64, int64(tc.n), 0.25, tc.key.Seed, tc.key.Step, tc.key.Tensor, uint64(off)); err != nil {
			t.Fatal(err)
		}
		got64 := download[float64](t, d, g64, tc.n)
		for i := range got64 {
			if math.Float64bits(got64[i]) != math.Float64bits(want64[i]) {
				t.Fatalf("Laplace f64 n=%d off=%d: %d = %v, CPU %v", tc.n, off, i, got64[i], want64[i])
			}
		}
		for _, b := range []drv.Buffer{g, g64} {
			if err := d.Free(b); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestBallSameNoise(t *testing.T) {
	d := openFake(t)
	key := kernels.NoiseKey{Seed: 7, Step: 3, Tensor: 2}
	lens := []int{5000, 3, 0, 4097, 1 << 18, 1<<16 + 1}
	var cpu [][]float32
	var bufs []drv.Buffer
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range lens {
		x := randF32(rng, n, 0.1)
		cpu = append(cpu, append([]float32(nil), x...))
		if n == 0 {
			bufs = append(bufs, drv.Buffer{})
			continue
		}
		bufs = append(bufs, upload(t, d, x))
	}
	kernels.AddBall(cpu, 2.5, key)
	if err := d.AddBall(bufs, lens, 2.5, drv.PhiloxKey(key)); err != nil {
		t.Fatal(err)
	}
	for p, n := range lens {
		if n == 0 {
			continue
		}
		got := download[float32](t, d, bufs[p], n)
		for i := range got {
			if got[i] != cpu[p][i] {
				t.Fatalf("ball tensor %d value %d = %v, CPU %v", p, i, got[i], cpu[p][i])
			}
		}
	}
}

func TestLayerOpsAgainstReference(t *testing.T) {
	d := openFake(t)
	rng := rand.New(rand.NewPCG(7, 8))
	const rows, k = 9, 10
	z := randF32(rng, rows*k, 3)
	z[3] = 0
	z[4] = 40 // tanh saturates
	Z := upload(t, d, z)
	H := mustAlloc(t, d, rows*k*4)
	for _, tanh := range []bool{false, true} {
		if err := d.Activate(H, Z, rows*k, tanh); err != nil {
			t.Fatal(err)
		}
		h := download[float32](t, d, H, rows*k)
		e := randF32(rng, rows*k, 1)
		E := upload(t, d, e)
		if err := d.ActivateBackward(E, Z, H, rows*k, tanh); err != nil {
			t.Fatal(err)
		}
		ge := download[float32](t, d, E, rows*k)
		for i, v := range z {
			var wh, we float64
			if tanh {
				wh = math.Tanh(float64(v))
				we = float64(e[i] * (1 - h[i]*h[i])) // float32, as the CPU's graph
			} else {
				wh = math.Max(float64(v), 0)
				we = float64(e[i])
				if v <= 0 {
					we = 0
				}
			}
			if !relClose(float64(h[i]), wh, 1e-6) || !relClose(float64(ge[i]), we, 1e-6) && math.Abs(we) > 1e-30 {
				t.Fatalf("tanh=%v z=%v: act %v want %v, bwd %v want %v", tanh, v, h[i], wh, ge[i], we)
			}
		}
	}
	// Softmax cross-entropy: one-hot rows and one padding row (y = 0).
	y := make([]float32, rows*k)
	for i := range rows - 1 {
		y[i*k+rng.IntN(k)] = 1
	}
	Y := upload(t, d, y)
	E, L, C := mustAlloc(t, d, rows*k*4), mustAlloc(t, d, rows*8), mustAlloc(t, d, rows*4)
	if err := d.SoftmaxXent(E, L, C, Z, Y, rows, k); err != nil {
		t.Fatal(err)
	}
	ge, gl, gc := download[float32](t, d, E, rows*k), download[float64](t, d, L, rows), download[int32](t, d, C, rows)
	for i := range rows {
		zi, yi := z[i*k:(i+1)*k], y[i*k:(i+1)*k]
		mx := math.Inf(-1)
		am, ay := 0, 0
		for j := range k {
			mx = math.Max(mx, float64(zi[j]))
			if zi[j] > zi[am] {
				am = j
			}
			if yi[j] > yi[ay] {
				ay = j
			}
		}
		s, ys := 0.0, 0.0
		for j := range k {
			s += math.Exp(float64(zi[j]) - mx)
			ys += float64(yi[j])
		}
		loss := 0.0
		for j := range k {
			p := math.Exp(float64(zi[j])-mx) / s
			loss -= float64(yi[j]) * (float64(zi[j]) - mx - math.Log(s))
			if w := p*ys - float64(yi[j]); math.Abs(float64(ge[i*k+j])-w) > 1e-6 {
				t.Fatalf("row %d: e[%d] = %v, want %v", i, j, ge[i*k+j], w)
			}
		}
		if !relClose(gl[i], loss, 1e-12) && math.Abs(gl[i]-loss) > 1e-14 {
			t.Fatalf("row %d: loss %v, want %v", i, gl[i], loss)
		}
		if (gc[i] == 1) != (am == ay) {
			t.Fatalf("row %d: correct %d, argmax %d vs %d", i, gc[i], am, ay)
		}
	}
	// Bias add and the padding mask.
	bias := randF32(rng, k, 1)
	B := upload(t, d, bias)
	if err := d.BiasAdd(Z, B, rows, k); err != nil {
		t.Fatal(err)
	}
	gz := download[float32](t, d, Z, rows*k)
	for i, v := range z {
		if gz[i] != v+bias[i%k] {
			t.Fatalf("bias add %d: %v, want %v", i, gz[i], v+bias[i%k])
		}
	}
	M := mustAlloc(t, d, 16*8)
	if err := d.PadMask(M, 11, 16); err != nil {
		t.Fatal(err)
	}
	for i, v := range download[float64](t, d, M, 16) {
		if (v == 1) != (i < 11) || (v != 0 && v != 1) {
			t.Fatalf("mask[%d] = %v", i, v)
		}
	}
}

// convArches are the convolution geometries of the row-layout kernel tests: several channels,
// padding in a later layer, pooling at strides 1 and 2 (overlapping windows, whose gradients
// add), the MNIST CNN's two layers on a 14×14 input, and a 4×4 kernel on a 3×3 input, which
// engine/nn accepts (one output position) and pads with zeros.
var convArches = []nn.Arch{
	{Kind: "cnn", Input: []int{2, 7, 6}, Classes: 3, Activation: nn.ReLU, Conv: []nn.ConvSpec{
		{Filters: 3, Kernel: 3, Stride: 1, Pad: 1, PoolKernel: 2, PoolStride: 1},
		{Filters: 4, Kernel: 3, Stride: 2, Pad: 1, PoolKernel: 2, PoolStride: 2},
	}},
	nn.CNN([]int{1, 14, 14}, 3, nil, nn.Tanh),
	{Kind: "cnn", Input: []int{1, 4, 4}, Classes: 3, Activation: nn.ReLU, Conv: []nn.ConvSpec{
		{Filters: 2, Kernel: 2, Stride: 1}, {Filters: 3, Kernel: 3, Stride: 2, Pad: 1},
	}},
}

// window is layout l's convolution window on its input (pool false) or its pooling window on
// the convolution's output (pool true), as the CUDA backend builds them.
func window(l nn.ConvLayout, pool bool) drv.Window {
	if pool {
		return drv.Window{C: l.Spec.Filters, H: l.OutH, W: l.OutW, K: l.Spec.PoolKernel, S: l.Spec.PoolStride}
	}
	return drv.Window{C: l.InC, H: l.InH, W: l.InW, K: l.Spec.Kernel, S: l.Spec.Stride, Pad: l.Spec.Pad}
}

// sameBits fails unless got and want hold the same float32 bits (NaNs of any payload alike).
func sameBits(t *testing.T, name string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
			t.Fatalf("%s[%d] = %v, engine/nn %v (want the same bits)", name, i, g, w)
		}
	}
}

// quantized draws values on a grid of 8 levels, so that pooling windows have ties.
func quantized(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.IntN(8)-4) * 0.25
	}
	return x
}

// TestConvOpsAgainstNN: the row-layout kernels (im2col for the first convolution and for a
// later one, its gradient col2im, max pooling with its argmax and the pooling gradient) give
// engine/nn's values bit for bit: the forward ops only move values, and the gradients add the
// same terms in the same order. Pooling inputs have ties (first maximum wins) and a NaN.
func TestConvOpsAgainstNN(t *testing.T) {
	d := openFake(t)
	rng := rand.New(rand.NewPCG(13, 14))
	const b = 3
	for ai, arch := range convArches {
		ls, err := arch.ConvLayouts()
		if err != nil {
			t.Fatal(err)
		}
		for li, l := range ls {
			name := fmt.Sprintf("arch %d layer %d", ai, li)
			w := window(l, false)
			oh, ow := w.Out()
			if oh != l.OutH || ow != l.OutW {
				t.Fatalf("%s: window output %d×%d, engine/nn %d×%d", name, oh, ow, l.OutH, l.OutW)
			}
			cols := l.InC * l.Spec.Kernel * l.Spec.Kernel
			x := randF32(rng, b*l.InC*l.InH*l.InW, 1)
			want := make([]float32, b*oh*ow*cols)
			if li == 0 {
				nn.Im2Col(want, x, b, l)
			} else {
				nn.Patches(want, x, b, l)
			}
			X, P := upload(t, d, x), mustAlloc(t, d, len(want)*4)
			if err := d.Im2Col(P, X, b, w, li == 0); err != nil {
				t.Fatal(err)
			}
			sameBits(t, name+" im2col", download[float32](t, d, P, len(want)), want)
			if li > 0 {
				dp := randF32(rng, len(want), 1)
				dx := make([]float32, len(x))
				nn.PatchesGrad(dx, dp, b, l)
				DP, DX := upload(t, d, dp), mustAlloc(t, d, len(x)*4)
				if err := d.Col2Im(DX, DP, b, w); err != nil {
					t.Fatal(err)
				}
				sameBits(t, name+" col2im", download[float32](t, d, DX, len(x)), dx)
			}
			if l.Spec.PoolKernel == 0 {
				continue
			}
			pw := window(l, true)
			z := quantized(rng, b*l.OutH*l.OutW*l.Spec.Filters)
			z[0] = float32(math.NaN())                       // a NaN at a window's first position: kept
			z[len(z)-1-l.Spec.Filters] = float32(math.NaN()) // a later NaN: never the maximum
			pooled := make([]float32, b*l.PoolH*l.PoolW*l.Spec.Filters)
			nn.Pool(pooled, z, b, l)
			Z, O, I := upload(t, d, z), mustAlloc(t, d, len(pooled)*4), mustAlloc(t, d, len(pooled)*4)
			if err := d.MaxPool(O, I, Z, b, pw); err != nil {
				t.Fatal(err)
			}
			sameBits(t, name+" maxpool", download[float32](t, d, O, len(pooled)), pooled)
			dy := randF32(rng, len(pooled), 1)
			dz := make([]float32, len(z))
			nn.PoolGrad(dz, z, dy, b, l)
			DY, DZ := upload(t, d, dy), mustAlloc(t, d, len(z)*4)
			if err := d.MaxPoolBackward(DZ, DY, I, b, pw); err != nil {
				t.Fatal(err)
			}
			sameBits(t, name+" maxpool backward", download[float32](t, d, DZ, len(z)), dz)
		}
	}
	// A pooling window that does not fit its input is refused, not read out of bounds, and
	// pooling takes no padding.
	big := mustAlloc(t, d, 1<<12)
	if err := d.MaxPool(big, big, big, 1, drv.Window{C: 1, H: 1, W: 3, K: 2, S: 2}); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("MaxPool with a 2×2 window on 1×3: err = %v", err)
	}
	if err := d.MaxPool(big, big, big, 1, drv.Window{C: 1, H: 4, W: 4, K: 2, S: 1, Pad: 1}); err == nil {
		t.Fatal("MaxPool with padding accepted")
	}
}

// TestExampleGradsAndCoefSum: the per-example gradients of a convolution-sized GEMM layer
// (ExampleGrads: one strided-batched GEMM and the bias column sums) against kernels.Gemm and
// the CPU's float32 bias sums, their squared norms, and the clipped sum Σ cᵢ·Ĝᵢ (CoefSum)
// against float64 sums in example order of the device's own Ĝᵢ, over two physical batches, an
// example with coefficient 0 whose gradient is NaN skipped.
func TestExampleGradsAndCoefSum(t *testing.T) {
	d := openFake(t)
	rng := rand.New(rand.NewPCG(15, 16))
	const b, p, din, h = 5, 9, 12, 4
	n := (din + 1) * h
	a, e := randF32(rng, b*p*din, 1), randF32(rng, b*p*h, 0.5)
	a[2*p*din+5] = float32(math.NaN()) // example 2: its gradient is NaN
	A, E, G := upload(t, d, a), upload(t, d, e), mustAlloc(t, d, b*n*4)
	if err := d.ExampleGrads(G, A, E, b, p, din, h); err != nil {
		t.Fatal(err)
	}
	g := download[float32](t, d, G, b*n)
	for i := range b {
		want := make([]float32, n)
		kernels.Gemm(true, false, din, h, p, 1, a[i*p*din:(i+1)*p*din], din, e[i*p*h:(i+1)*p*h], h, 0, want[:din*h], h)
		for r := range p {
			for j := range h {
				want[din*h+j] += e[(i*p+r)*h+j]
			}
		}
		if i == 2 {
			if !math.IsNaN(float64(g[i*n+5*h])) {
				t.Fatalf("example 2's gradient row 5 = %v, want NaN", g[i*n+5*h])
			}
			continue
		}
		checkClose(t, fmt.Sprintf("Ĝ%d weights", i), g[i*n:i*n+din*h], want[:din*h], 1e-6)
		sameBits(t, fmt.Sprintf("Ĝ%d bias", i), g[i*n+din*h:(i+1)*n], want[din*h:])
	}
	// Norms: row_sqnorm over each example's (din+1)·h values, added to norm2.
	norm2 := make([]float64, b)
	for i := range norm2 {
		norm2[i] = 0.5
	}
	N2, SQ := upload(t, d, norm2), mustAlloc(t, d, b*8)
	if err := errors.Join(d.RowSqNorms(SQ, G, b, n), d.AddF64(N2, SQ, b)); err != nil {
		t.Fatal(err)
	}
	gn := download[float64](t, d, N2, b)
	for i := range b {
		sq := make([]float64, 1)
		kernels.RowSqNorms(sq, g[i*n:(i+1)*n], 1, n)
		if want := 0.5 + sq[0]; !relClose(gn[i], want, 1e-15) && !(math.IsNaN(gn[i]) && math.IsNaN(want)) {
			t.Fatalf("norm2[%d] = %v, want %v", i, gn[i], want)
		}
	}
	// Clipped sums over two batches: the second adds to the first in float64.
	coef := []float64{0.5, 1, 0, 0.25, 1e-3}
	C := upload(t, d, coef)
	ACC, W, B := mustAlloc(t, d, n*8), mustAlloc(t, d, din*h*4), mustAlloc(t, d, h*4)
	want := make([]float64, n)
	for pass := range 2 {
		batch := make([]float64, n)
		for i, c := range coef {
			if c == 0 {
				continue
			}
			for j := range n {
				batch[j] += c * float64(g[i*n+j])
			}
		}
		for j := range n {
			want[j] += batch[j]
		}
		if err := d.CoefSum(ACC, W, B, G, C, b, din, h, pass == 0); err != nil {
			t.Fatal(err)
		}
		acc := download[float64](t, d, ACC, n)
		gw, gb := download[float32](t, d, W, din*h), download[float32](t, d, B, h)
		for j := range n {
			if acc[j] != want[j] {
				t.Fatalf("pass %d: acc[%d] = %v, want %v (the same float64 sums)", pass, j, acc[j], want[j])
			}
			got := gb[max(j-din*h, 0)]
			if j < din*h {
				got = gw[j]
			}
			if got != float32(want[j]) {
				t.Fatalf("pass %d: rounded sum %d = %v, want %v", pass, j, got, float32(want[j]))
			}
		}
	}
	// The batched GEMM refuses matrices past the end of their buffers.
	if err := d.SgemmStridedBatched(true, false, din, h, p, 1, A, din, p*din, E, h, p*h, 0, G, h, n, b+1); err == nil {
		t.Fatal("SgemmStridedBatched past the end of its buffers accepted")
	}
}

func BenchmarkFakeGaussian(b *testing.B) {
	d := openFake(b)
	const n = 1 << 14
	g := mustAlloc(b, d, n*4)
	b.SetBytes(n * 4)
	for i := 0; b.Loop(); i++ {
		if err := d.AddGaussian(g, n, 1, drv.PhiloxKey(kernels.NoiseKey{Seed: 1, Step: uint64(i)}), 0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestScaleRowsClipScaleRow: the device's scaled error rows are kernels.ClipScaleRow's bit
// for bit, where float32(c) is subnormal (c < 2⁻¹²⁶: a record of huge activations) and where
// c is normal but the product is subnormal (tiny errors), and never above c·|v| there: the
// naive float32(c)·v rounds c between 2⁻¹⁵⁰ and 2⁻¹⁴⁹ up to 2⁻¹⁴⁹, twice c.
func TestScaleRowsClipScaleRow(t *testing.T) {
	d := openFake(t)
	const h = 7
	coefs := []float64{0x1.8p-150, 0x1.2p-149, 0x1.fp-149, 0x1.4p-140, 0x1.ffp-127, 0x1.3p-126, 3e-30, 0.37, 1e-3, 1, 0}
	vals := []float32{1, -1, 0.6, -0.75, 3e-10, -5e-12, 1e-30, 7e-39, 0, float32(math.Copysign(0, -1)), 123456.7, -3.4e38}
	b := len(coefs) * len(vals)
	e, c := make([]float32, b*h), make([]float64, b)
	for i := range b {
		c[i] = coefs[i%len(coefs)]
		for j := range h {
			e[i*h+j] = vals[(i/len(coefs)+j)%len(vals)] * float32(1+j) / float32(h)
		}
	}
	want := make([]float32, b*h)
	for i := range b {
		switch c[i] {
		case 0:
		case 1:
			copy(want[i*h:(i+1)*h], e[i*h:(i+1)*h])
		default:
			kernels.ClipScaleRow(want[i*h:(i+1)*h], e[i*h:(i+1)*h], c[i])
		}
	}
	S := mustAlloc(t, d, b*h*4)
	if err := d.ScaleRows(S, upload(t, d, e), b, h, upload(t, d, c)); err != nil {
		t.Fatal(err)
	}
	got := download[float32](t, d, S, b*h)
	for k := range got {
		i := k / h
		if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
			t.Errorf("c = %v, v = %v: device %v (%#x), CPU %v (%#x)", c[i], e[k], got[k], math.Float32bits(got[k]), want[k], math.Float32bits(want[k]))
		}
		if c[i] != 1 && math.Abs(float64(got[k])) > c[i]*math.Abs(float64(e[k]))*(1+0x1p-23) {
			t.Errorf("c = %v, v = %v: |device| %v above c·|v| = %v", c[i], e[k], got[k], c[i]*math.Abs(float64(e[k])))
		}
	}
}
