package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	drv "github.com/dpsgd/dpsgd/cuda"
)

// The kernels of the layer library's parameter-free layers (GELU, the tempered sigmoid, average
// pooling, the residual sum) against references written here from engine/nn's definitions
// (pointOp's f and f′ in float64, avgPoolForward/Backward's float32 sums in scan order); the
// engine's tests run them inside whole steps against engine/nn itself.

func geluRef(x float64) float64 { return x * 0.5 * math.Erfc(-x/math.Sqrt2) }

func geluDiffRef(x float64) float64 {
	return 0.5*math.Erfc(-x/math.Sqrt2) + x*math.Exp(-x*x/2)/math.Sqrt(2*math.Pi)
}

func temperedRef(scale, temp, offset float64) (f, df func(float64) float64) {
	return func(x float64) float64 { return scale/(1+math.Exp(-temp*x)) - offset },
		func(x float64) float64 {
			s := 1 / (1 + math.Exp(-temp*x))
			return scale * temp * s * (1 - s)
		}
}

// pointInputs are random values at several scales and the edges: zeros of both signs, a
// subnormal, the branch points of erfc (0.84375, 1.25, 1/0.35, 6, 28, times √2), huge values,
// infinities and NaN.
func pointInputs(rng *rand.Rand) []float32 {
	x := append(randF32(rng, 300, 0.3), randF32(rng, 300, 3)...)
	x = append(x, randF32(rng, 100, 30)...)
	for _, v := range []float64{0, math.Copysign(0, -1), 1e-45, -1e-45, 1e-30, 1e30, -1e30, math.MaxFloat32, -math.MaxFloat32,
		math.Inf(1), math.Inf(-1), math.NaN()} {
		x = append(x, float32(v))
	}
	for _, b := range []float64{0.84375, 1.25, 1 / 0.35, 6, 28, 1.0 / (1 << 56)} {
		for _, s := range []float64{1, -1} {
			for _, e := range []float64{1 - 1e-7, 1, 1 + 1e-7} {
				x = append(x, float32(s*b*e*math.Sqrt2))
			}
		}
	}
	return x
}

// ulpClose: a and b are the same float32 but for one unit in the last place (the device's
// exponentials are within an ulp or so of math.Exp in float64, which rounding to float32 almost
// always hides), NaN with NaN, an infinity with the same infinity.
func ulpClose(a, b float32) bool {
	if a != a || b != b {
		return a != a && b != b
	}
	if a == b {
		return true
	}
	if math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) || (a < 0) != (b < 0) {
		return math.Abs(float64(a)-float64(b)) <= 1e-37
	}
	d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
	return d >= -1 && d <= 1
}

// TestPointOpsAgainstReference: Point and PointBackward (GELU and two tempered sigmoids) give
// float32(f(x)) and e·float32(f′(x)) of engine/nn's float64 definitions to an ulp, on random
// values and on every edge (signed zeros, subnormals, erfc's branch points, ±1e30, ±Inf, NaN);
// and refuse an unknown function or a non-positive scale.
func TestPointOpsAgainstReference(t *testing.T) {
	d := openFake(t)
	rng := rand.New(rand.NewPCG(41, 42))
	x := pointInputs(rng)
	e := randF32(rng, len(x), 1)
	ts, tsd := temperedRef(2, 2, 1)
	ts2, ts2d := temperedRef(1.5, 0.25, -0.3)
	for _, c := range []struct {
		name  string
		fn    drv.PointFn
		f, df func(float64) float64
	}{
		{"gelu", drv.PointFn{Fn: drv.PointGELU}, geluRef, geluDiffRef},
		{"tempered(2,2,1)", drv.PointFn{Fn: drv.PointTemperedSigmoid, Scale: 2, Temp: 2, Offset: 1}, ts, tsd},
		{"tempered(1.5,0.25,-0.3)", drv.PointFn{Fn: drv.PointTemperedSigmoid, Scale: 1.5, Temp: 0.25, Offset: -0.3}, ts2, ts2d},
	} {
		X, E, Y := upload(t, d, x), upload(t, d, e), mustAlloc(t, d, len(x)*4)
		if err := firstErrT(d.Point(Y, X, len(x), c.fn), d.PointBackward(E, X, len(x), c.fn)); err != nil {
			t.Fatal(err)
		}
		y, ge := download[float32](t, d, Y, len(x)), download[float32](t, d, E, len(x))
		ulps := 0
		for i, v := range x {
			want := float32(c.f(float64(v)))
			if !ulpClose(y[i], want) {
				t.Fatalf("%s(%v) = %v, want %v", c.name, v, y[i], want)
			}
			wd := e[i] * float32(c.df(float64(v)))
			if !ulpClose(ge[i], wd) {
				t.Fatalf("%s′(%v)·%v = %v, want %v", c.name, v, e[i], ge[i], wd)
			}
			if y[i] != want || ge[i] != wd {
				ulps++
			}
		}
		if ulps > len(x)/50 {
			t.Fatalf("%s: %d of %d values an ulp off: the device's function is not engine/nn's", c.name, ulps, len(x))
		}
	}
	buf := mustAlloc(t, d, 64)
	for _, f := range []drv.PointFn{{Fn: 7}, {Fn: drv.PointTemperedSigmoid, Scale: 0, Temp: 1}, {Fn: drv.PointTemperedSigmoid, Scale: 1, Temp: math.Inf(1)},
		{Fn: drv.PointTemperedSigmoid, Scale: 1, Temp: 1, Offset: math.NaN()}} {
		if err := d.Point(buf, buf, 4, f); err == nil {
			t.Fatalf("Point with %+v accepted", f)
		}
	}
}

func firstErrT(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// avgPoolRef is engine/nn's average pooling and its gradient on b examples in the row layout:
// float32 sums from 0 in scan order, times float32(1/(k·k)); the gradient adds dy·inv into a
// cleared dx window by window.
func avgPoolRef(x, dy []float32, b int, w drv.Window) (out, dx []float32) {
	oh, ow := w.Out()
	c := w.C
	inv := 1 / float32(w.K*w.K)
	out, dx = make([]float32, b*oh*ow*c), make([]float32, b*w.H*w.W*c)
	for i := range b {
		xi, dxi := x[i*w.H*w.W*c:], dx[i*w.H*w.W*c:]
		for oy := range oh {
			for ox := range ow {
				o := ((i*oh+oy)*ow + ox) * c
				for ch := range c {
					var acc float32
					for ky := range w.K {
						for kx := range w.K {
							acc += xi[((oy*w.S+ky)*w.W+ox*w.S+kx)*c+ch]
						}
					}
					out[o+ch] = acc * inv
					for ky := range w.K {
						for kx := range w.K {
							v := dy[o+ch] * inv
							dxi[((oy*w.S+ky)*w.W+ox*w.S+kx)*c+ch] += v
						}
					}
				}
			}
		}
	}
	return out, dx
}

// TestAvgPoolAndAddAgainstReference: AvgPool and AvgPoolBackward give the reference's bits for
// windows that overlap, tile, skip positions and cover the whole input; AddF32 gives a + b's
// bits; a window that does not fit, or padding, is refused.
func TestAvgPoolAndAddAgainstReference(t *testing.T) {
	d := openFake(t)
	rng := rand.New(rand.NewPCG(43, 44))
	const b = 3
	for _, w := range []drv.Window{{C: 3, H: 7, W: 6, K: 2, S: 2}, {C: 2, H: 5, W: 5, K: 3, S: 1}, {C: 4, H: 8, W: 7, K: 2, S: 3},
		{C: 1, H: 4, W: 4, K: 4, S: 1}, {C: 5, H: 3, W: 2, K: 1, S: 1}} {
		oh, ow := w.Out()
		x, dy := randF32(rng, b*w.H*w.W*w.C, 1), randF32(rng, b*oh*ow*w.C, 1)
		x[len(x)/2] = float32(math.Inf(1))
		out, dx := avgPoolRef(x, dy, b, w)
		X, DY := upload(t, d, x), upload(t, d, dy)
		O, DX := mustAlloc(t, d, len(out)*4), mustAlloc(t, d, len(dx)*4)
		if err := firstErrT(d.AvgPool(O, X, b, w), d.AvgPoolBackward(DX, DY, b, w)); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("avgpool %+v", w)
		sameBits(t, name, download[float32](t, d, O, len(out)), out)
		sameBits(t, name+" backward", download[float32](t, d, DX, len(dx)), dx)
	}
	a, c := randF32(rng, 999, 1e3), randF32(rng, 999, 1)
	a[5] = float32(math.NaN())
	want := make([]float32, len(a))
	for i := range a {
		want[i] = a[i] + c[i]
	}
	A, C := upload(t, d, a), upload(t, d, c)
	if err := d.AddF32(A, A, C, len(a)); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "add", download[float32](t, d, A, len(a)), want)
	big := mustAlloc(t, d, 1<<12)
	if err := d.AvgPool(big, big, 1, drv.Window{C: 1, H: 1, W: 3, K: 2, S: 2}); err == nil {
		t.Fatal("AvgPool with a 2×2 window on 1×3 accepted")
	}
	if err := d.AvgPoolBackward(big, big, 1, drv.Window{C: 1, H: 4, W: 4, K: 2, S: 1, Pad: 1}); err == nil {
		t.Fatal("AvgPoolBackward with padding accepted")
	}
}

// normRef is engine/nn's normOp (forward, or with gx its gradient) on b examples of p rows ×
// c channels in groups, in float64 in its order.
func normRef(x, gx []float32, b, p, c, groups int) []float32 {
	out := make([]float32, len(x))
	per, cg := p*c, c/groups
	m := float64(p * cg)
	for i := range b {
		xi, oi := x[i*per:(i+1)*per], out[i*per:(i+1)*per]
		for grp := range groups {
			lo, hi := grp*cg, (grp+1)*cg
			var mu, v2 float64
			for r := range p {
				for _, v := range xi[r*c+lo : r*c+hi] {
					mu += float64(v)
				}
			}
			mu /= m
			for r := range p {
				for _, v := range xi[r*c+lo : r*c+hi] {
					d := float64(v) - mu
					v2 += d * d
				}
			}
			inv := 1 / math.Sqrt(v2/m+1e-5)
			if gx == nil {
				for r := range p {
					for j := lo; j < hi; j++ {
						oi[r*c+j] = float32((float64(xi[r*c+j]) - mu) * inv)
					}
				}
				continue
			}
			gi := gx[i*per : (i+1)*per]
			var sg, sgx float64
			for r := range p {
				for j := lo; j < hi; j++ {
					gv := float64(gi[r*c+j])
					sg += gv
					sgx += gv * (float64(xi[r*c+j]) - mu) * inv
				}
			}
			sg /= m
			sgx /= m
			for r := range p {
				for j := lo; j < hi; j++ {
					xh := (float64(xi[r*c+j]) - mu) * inv
					oi[r*c+j] = float32((float64(gi[r*c+j]) - sg - xh*sgx) * inv)
				}
			}
		}
	}
	return out
}

// TestNormOpsAgainstReference: Norm and NormBackward give engine/nn's normOp bits (its
// operations in its order, in float64) for group and layer normalizations, a row of huge
// values and a constant group (σ² = 0: only ε under the root) among them; Affine gives
// float32(x̂·γ) + β and e·γ; NormGrads gives each example's (Σ e⊙x̂, Σ e) in float64 in row
// order, RowSqNormsAddF64 adds their squared norms, CoefSumF64 sums cᵢ·gᵢ in example order,
// skipping cᵢ = 0 whose gradient is NaN, over two batches; bad groups are refused.
func TestNormOpsAgainstReference(t *testing.T) {
	d := openFake(t)
	rng := rand.New(rand.NewPCG(45, 46))
	for _, g := range []struct{ b, p, c, groups int }{{3, 1, 12, 1}, {3, 9, 6, 2}, {2, 4, 4, 4}, {4, 5, 3, 1}} {
		n := g.b * g.p * g.c
		x, gx := randF32(rng, n, 2), randF32(rng, n, 1)
		x[0] = 1e30
		for r := range g.p { // example 1's first group constant
			for j := range g.c / g.groups {
				x[(g.p+r)*g.c+j] = 0.5
			}
		}
		name := fmt.Sprintf("norm %+v", g)
		X, GX, O := upload(t, d, x), upload(t, d, gx), mustAlloc(t, d, n*4)
		if err := d.Norm(O, X, g.b, g.p, g.c, g.groups); err != nil {
			t.Fatal(err)
		}
		xh := download[float32](t, d, O, n)
		sameBits(t, name, xh, normRef(x, nil, g.b, g.p, g.c, g.groups))
		if err := d.NormBackward(O, X, GX, g.b, g.p, g.c, g.groups); err != nil {
			t.Fatal(err)
		}
		sameBits(t, name+" backward", download[float32](t, d, O, n), normRef(x, gx, g.b, g.p, g.c, g.groups))

		gamma, beta := randF32(rng, g.c, 1), randF32(rng, g.c, 1)
		XH, GA, BE := upload(t, d, xh), upload(t, d, gamma), upload(t, d, beta)
		if err := d.Affine(O, XH, GA, BE, g.b*g.p, g.c); err != nil {
			t.Fatal(err)
		}
		want := make([]float32, n)
		for k, v := range xh {
			s := v * gamma[k%g.c]
			want[k] = s + beta[k%g.c]
		}
		sameBits(t, name+" affine", download[float32](t, d, O, n), want)
		if err := d.Affine(O, GX, GA, drv.Buffer{}, g.b*g.p, g.c); err != nil {
			t.Fatal(err)
		}
		for k, v := range gx {
			want[k] = v * gamma[k%g.c]
		}
		sameBits(t, name+" affine backward", download[float32](t, d, O, n), want)

		w := 2 * g.c
		G, N2 := mustAlloc(t, d, g.b*w*8), upload(t, d, make([]float64, g.b))
		if err := firstErrT(d.NormGrads(G, GX, XH, g.b, g.p, g.c), d.RowSqNormsAddF64(N2, G, g.b, w)); err != nil {
			t.Fatal(err)
		}
		gg, n2 := download[float64](t, d, G, g.b*w), download[float64](t, d, N2, g.b)
		for i := range g.b {
			var sq float64
			for j := range g.c {
				var sg, sb float64
				for r := i * g.p; r < (i+1)*g.p; r++ {
					sg += float64(gx[r*g.c+j]) * float64(xh[r*g.c+j])
					sb += float64(gx[r*g.c+j])
				}
				if gg[i*w+j] != sg || gg[i*w+g.c+j] != sb {
					t.Fatalf("%s: example %d channel %d grads (%v, %v), want (%v, %v)", name, i, j, gg[i*w+j], gg[i*w+g.c+j], sg, sb)
				}
			}
			for _, v := range gg[i*w : (i+1)*w] {
				sq += v * v
			}
			if !relClose(n2[i], sq, 1e-14) {
				t.Fatalf("%s: example %d squared norm %v, want %v", name, i, n2[i], sq)
			}
		}
		gg[w] = math.NaN() // example 1: coefficient 0, never multiplied
		coef := []float64{0.5, 0, 1, 0.25}[:g.b]
		ACC, C, G2 := mustAlloc(t, d, w*8), upload(t, d, coef), upload(t, d, gg)
		if err := firstErrT(d.CoefSumF64(ACC, G2, C, g.b, w, true), d.CoefSumF64(ACC, G2, C, g.b, w, false)); err != nil {
			t.Fatal(err)
		}
		acc := download[float64](t, d, ACC, w)
		for j := range w {
			var s float64
			for i, c := range coef {
				if c != 0 {
					s += c * gg[i*w+j]
				}
			}
			if want := (0 + s) + s; acc[j] != want {
				t.Fatalf("%s: clipped sum %d = %v, want %v", name, j, acc[j], want)
			}
		}
	}
	big := mustAlloc(t, d, 1<<12)
	if err := d.Norm(big, big, 2, 3, 6, 4); err == nil {
		t.Fatal("Norm with 4 groups of 6 channels accepted")
	}
}

// tokenRef is engine/nn's tokenID.
func tokenRef(v float32, n int) int {
	d := float64(v)
	if !(d >= 0 && d < float64(n)) || d != math.Trunc(d) {
		return -1
	}
	return int(d)
}

// TestEmbedOpsAgainstReference: Embed gives the table's rows of valid ids and zero rows for
// invalid ones (−1, the vocabulary's size, a fraction, NaN, ±Inf, 1e30); EmbedNorms adds each
// example's ‖Σ_{positions of an id} e‖² summed over its ids (an example whose repeated id has
// opposite errors included: its norm is that of the sum, not of the rows); EmbedCoefSum sums
// cᵢ times those grouped rows into the table's float64 sums over two physical batches, skipping
// cᵢ = 0 (whose errors are NaN), within 1e-12 relative of brute-force float64 sums.
func TestEmbedOpsAgainstReference(t *testing.T) {
	d := openFake(t)
	rng := rand.New(rand.NewPCG(47, 48))
	const b, l, vocab, dim = 5, 7, 6, 3
	x := make([]float32, b*l)
	for i := range x {
		x[i] = float32(rng.IntN(vocab))
	}
	copy(x[l:], []float32{-1, 6, 2.5, float32(math.NaN()), float32(math.Inf(1)), 1e30, 3})
	x[2*l], x[2*l+1] = 4, 4
	table, e := randF32(rng, vocab*dim, 1), randF32(rng, b*l*dim, 1)
	for k := range dim { // example 2: id 4 twice with opposite errors
		e[(2*l+1)*dim+k] = -e[2*l*dim+k]
	}
	for k := range l * dim { // example 3: coefficient 0, NaN errors
		e[3*l*dim+k] = float32(math.NaN())
	}
	X, T, E := upload(t, d, x), upload(t, d, table), upload(t, d, e)
	O := mustAlloc(t, d, b*l*dim*4)
	if err := d.Embed(O, X, T, b, l, vocab, dim); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, b*l*dim)
	for p, v := range x {
		if id := tokenRef(v, vocab); id >= 0 {
			copy(want[p*dim:(p+1)*dim], table[id*dim:(id+1)*dim])
		}
	}
	sameBits(t, "embed", download[float32](t, d, O, len(want)), want)
	// grouped is example i's gradient of the table, vocab×dim float64.
	grouped := func(i int) []float64 {
		g := make([]float64, vocab*dim)
		for p := i * l; p < (i+1)*l; p++ {
			if id := tokenRef(x[p], vocab); id >= 0 {
				for k := range dim {
					g[id*dim+k] += float64(e[p*dim+k])
				}
			}
		}
		return g
	}
	N2 := upload(t, d, []float64{1, 2, 3, 4, 5})
	if err := d.EmbedNorms(N2, X, E, b, l, vocab, dim); err != nil {
		t.Fatal(err)
	}
	n2 := download[float64](t, d, N2, b)
	for i := range b {
		var s float64
		for _, v := range grouped(i) {
			s += v * v
		}
		if i == 3 {
			if !math.IsNaN(n2[i]) {
				t.Fatalf("example 3 (NaN errors): norm² %v, want NaN", n2[i])
			}
			continue
		}
		if !relClose(n2[i]-float64(i+1), s, 1e-12) {
			t.Fatalf("example %d: norm² %v, want %v", i, n2[i]-float64(i+1), s)
		}
	}
	coef := []float64{0.5, 1, 0.25, 0, 0.125}
	C, ACC := upload(t, d, coef), mustAlloc(t, d, vocab*dim*8)
	if err := firstErrT(d.EmbedCoefSum(ACC, X, E, C, b, l, vocab, dim, true), d.EmbedCoefSum(ACC, X, E, C, b, l, vocab, dim, false)); err != nil {
		t.Fatal(err)
	}
	acc := download[float64](t, d, ACC, vocab*dim)
	sum := make([]float64, vocab*dim)
	for i, c := range coef {
		if c == 0 {
			continue
		}
		for j, v := range grouped(i) {
			sum[j] += c * v
		}
	}
	for j := range sum {
		if !relClose(acc[j], 2*sum[j], 1e-12) && math.Abs(acc[j]-2*sum[j]) > 1e-15 {
			t.Fatalf("table sum %d: %v, want %v", j, acc[j], 2*sum[j])
		}
	}
	if err := d.Embed(O, X, T, b, 0, vocab, dim); err == nil {
		t.Fatal("Embed with 0 ids per example accepted")
	}
}
