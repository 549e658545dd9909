package kernels

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas/gonum"
)

func checkRowSqNorms[T Float](t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	for _, sh := range [][2]int{{0, 5}, {3, 0}, {1, 1}, {7, 3}, {5, 17}, {33, 784}, {4, 1001}} {
		rows, cols := sh[0], sh[1]
		a := randSlice[T](rng, rows*cols)
		dst := make([]float64, rows+1)
		dst[rows] = 42 // beyond rows: untouched
		for i := range rows {
			dst[i] = math.NaN() // overwritten
		}
		RowSqNorms(dst, a, rows, cols)
		for i := range rows {
			want := 0.0
			for j := range cols {
				v := float64(a[i*cols+j])
				want += v * v
			}
			if math.Abs(dst[i]-want) > 1e-14*want {
				t.Errorf("%dx%d row %d: %v, naive %v", rows, cols, i, dst[i], want)
			}
		}
		if dst[rows] != 42 {
			t.Errorf("%dx%d: wrote past rows", rows, cols)
		}
	}
	// Non-finite entries give a non-finite norm (that ClipCoefs then zeroes).
	a := []T{1, T(math.NaN()), 2, T(math.Inf(-1)), 0, 0}
	dst := make([]float64, 3)
	RowSqNorms(dst, a, 3, 2)
	if !math.IsNaN(dst[0]) || !math.IsInf(dst[1], 1) || dst[2] != 0 {
		t.Errorf("non-finite rows: %v", dst)
	}
}

func TestRowSqNorms(t *testing.T) {
	t.Run("float64", checkRowSqNorms[float64])
	t.Run("float32", checkRowSqNorms[float32])
}

// TestSqNormPositionIndependent: the same row gives the same bits at every offset in memory
// (an example's norm must not depend on where it sits in the batch).
func TestSqNormPositionIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(83, 84))
	for _, n := range []int{1, 3, 7, 17, 64, 101} {
		row := randSlice[float32](rng, n)
		for j := range row {
			row[j] *= float32(math.Exp(8 * rng.NormFloat64())) // wide range: rounding shows
		}
		want := SqNorm(row)
		for off := range 9 {
			buf := make([]float32, off+n)
			copy(buf[off:], row)
			if got := SqNorm(buf[off:]); math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("n=%d offset %d: %v, at offset 0 %v", n, off, got, want)
			}
			a := make([]float32, off+3*n)
			copy(a[off+2*n:], row)
			dst := make([]float64, 3)
			RowSqNorms(dst, a[off:], 3, n) // row 2 is `row`, at offset off+2n
			if math.Float64bits(dst[2]) != math.Float64bits(want) {
				t.Fatalf("RowSqNorms n=%d offset %d: %v, want %v", n, off, dst[2], want)
			}
		}
	}
}

// TestSqNormTinyFloat64: squares that underflow in float64 do not make a norm vanish or shrink:
// the result is at least the exact sum, and close to it.
func TestSqNormTinyFloat64(t *testing.T) {
	cases := [][]float64{
		{5e-324},
		{5e-324, -5e-324, 1e-320},
		{1e-170, 3e-200, -2e-160},
		{1e-160, 1e-160, 1e-160, 1e-160},
		{0x1p-485, 0x1p-600},
		{0, 0, 0},
	}
	for _, x := range cases {
		exact := new(big.Float).SetPrec(2000)
		for _, v := range x {
			b := new(big.Float).SetPrec(2000).SetFloat64(v)
			exact.Add(exact, b.Mul(b, b))
		}
		got := SqNorm(x)
		g := new(big.Float).SetPrec(2000).SetFloat64(got)
		lo := exact // a subnormal result is rounded up; a normal one to nearest
		if got >= 0x1p-1022 {
			lo = new(big.Float).SetPrec(2000).Mul(exact, big.NewFloat(1-1e-15))
		}
		if g.Cmp(lo) < 0 {
			t.Errorf("%v: %v below the exact %v", x, got, exact.Text('g', 10))
		}
		// Within one subnormal step (rounded up) or 1e-15 relative of the exact value.
		hi := new(big.Float).SetPrec(2000).Mul(exact, big.NewFloat(1+1e-15))
		hi.Add(hi, new(big.Float).SetFloat64(0x1p-1073))
		if g.Cmp(hi) > 0 {
			t.Errorf("%v: %v far above the exact %v", x, got, exact.Text('g', 10))
		}
	}
	if SqNorm([]float64{0, 0}) != 0 || SqNorm([]float64{}) != 0 {
		t.Error("zero row: nonzero norm")
	}
	if !math.IsInf(SqNorm([]float64{1e300, 1}), 1) {
		t.Error("overflow: want +Inf")
	}
}

// GhostAccum over two dense layers against the squared norm of the
// materialized per-example gradient [aᵢ⊗eᵢ, eᵢ] of each layer.
func TestGhostAccumMatchesMaterialized(t *testing.T) {
	rng := rand.New(rand.NewPCG(91, 92))
	const b = 9
	layers := []struct {
		d, h    int
		hasBias bool
	}{{13, 7, true}, {7, 4, false}, {5, 1, true}}
	norm2 := make([]float64, b)
	want := make([]float64, b)
	for _, L := range layers {
		A := randSlice[float64](rng, b*L.d)
		E := randSlice[float64](rng, b*L.h)
		asq, esq := make([]float64, b), make([]float64, b)
		RowSqNorms(asq, A, b, L.d)
		RowSqNorms(esq, E, b, L.h)
		GhostAccum(norm2, asq, esq, L.hasBias)
		for i := range b {
			g := 0.0
			for p := range L.d {
				for q := range L.h {
					w := A[i*L.d+p] * E[i*L.h+q] // (aᵢ⊗eᵢ)[p,q]
					g += w * w
				}
			}
			if L.hasBias {
				for q := range L.h {
					g += E[i*L.h+q] * E[i*L.h+q]
				}
			}
			want[i] += g
		}
	}
	for i := range b {
		if math.Abs(norm2[i]-want[i]) > 1e-13*want[i] {
			t.Errorf("example %d: ghost %v, materialized %v", i, norm2[i], want[i])
		}
	}
}

func TestClipCoefs(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name      string
		norm2     []float64
		mask      []float64
		clip      float64
		want      []float64
		nonFinite int
	}{
		{"clip and pass", []float64{4, 0.25, 1, 16}, []float64{1, 1, 1, 1}, 1, []float64{0.5, 1, 1, 0.25}, 0},
		{"mask zero", []float64{4, 0.25, 9}, []float64{0, 0, 1}, 1.5, []float64{0, 0, 0.5}, 0},
		{"zero norm", []float64{0, 0}, []float64{1, 0}, 1, []float64{1, 0}, 0},
		{"non-finite", []float64{nan, inf, -inf, -1, 4}, []float64{1, 1, 1, 1, 1}, 1, []float64{0, 0, 0, 0, 0.5}, 4},
		{"non-finite padding not counted", []float64{nan, 1, inf}, []float64{0, 1, 0}, 2, []float64{0, 1, 0}, 0},
		{"no clipping", []float64{1e300, 0, 1e-300, 7}, []float64{1, 1, 0, 1}, inf, []float64{1, 1, 0, 1}, 0},
		{"no clipping, non-finite", []float64{inf, nan, 1}, []float64{1, 1, 1}, inf, []float64{0, 0, 1}, 2},
		{"nil mask", []float64{4, 1, nan}, nil, 1, []float64{0.5, 1, 0}, 1},
		{"huge and tiny", []float64{math.MaxFloat64, 5e-324}, []float64{1, 1}, 1, []float64{1 / math.Sqrt(math.MaxFloat64), 1}, 0},
	}
	for _, c := range cases {
		coef := make([]float64, len(c.norm2))
		for i := range coef {
			coef[i] = nan
		}
		nf := ClipCoefs(coef, c.norm2, c.mask, c.clip)
		if nf != c.nonFinite {
			t.Errorf("%s: nonFinite = %d, want %d", c.name, nf, c.nonFinite)
		}
		for i := range coef {
			if math.Abs(coef[i]-c.want[i]) > 1e-16*c.want[i] || math.IsNaN(coef[i]) {
				t.Errorf("%s: coef[%d] = %v, want %v", c.name, i, coef[i], c.want[i])
			}
		}
	}
	mustPanic(t, "clip 0", func() { ClipCoefs(make([]float64, 1), []float64{1}, nil, 0) })
	mustPanic(t, "clip −1", func() { ClipCoefs(make([]float64, 1), []float64{1}, nil, -1) })
	mustPanic(t, "clip NaN", func() { ClipCoefs(make([]float64, 1), []float64{1}, nil, nan) })
	mustPanic(t, "short mask", func() { ClipCoefs(make([]float64, 2), []float64{1, 1}, []float64{1}, 1) })
}

// TestClipCoefsSubnormal: a coefficient in the subnormal range is rounded toward zero, never
// up, and stays positive where the quotient is representable.
func TestClipCoefsSubnormal(t *testing.T) {
	for _, c := range []struct{ clip, norm2 float64 }{{1e-160, 1e300}, {3e-170, 7e297}, {1e-154, 1e300}, {1e-200, 1e240}} {
		coef := make([]float64, 1)
		ClipCoefs(coef, []float64{c.norm2}, nil, c.clip)
		// The quotient by the float64 root (√ rounds too, by half an ulp).
		exact := new(big.Float).SetPrec(300).Quo(big.NewFloat(c.clip), big.NewFloat(math.Sqrt(c.norm2)))
		if coef[0] <= 0 || new(big.Float).SetFloat64(coef[0]).Cmp(exact) > 0 {
			t.Errorf("clip %g, norm² %g: coef %g, C/√norm² = %s", c.clip, c.norm2, coef[0], exact.Text('g', 10))
		}
	}
}

// Property: a clipped example has norm exactly C up to rounding, and an
// unclipped one keeps coefficient 1.
func TestClipCoefsProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(93, 94))
	n := 10000
	norm2, coef := make([]float64, n), make([]float64, n)
	for i := range norm2 {
		norm2[i] = math.Exp(rng.NormFloat64() * 5)
	}
	const clip = 1.7
	ClipCoefs(coef, norm2, nil, clip)
	for i, v := range norm2 {
		g := math.Sqrt(v)
		if g <= clip && coef[i] != 1 {
			t.Fatalf("‖g‖ = %v ≤ C but coef = %v", g, coef[i])
		}
		if g > clip && math.Abs(coef[i]*g-clip) > 4e-16*clip {
			t.Fatalf("‖g‖ = %v > C: coef·‖g‖ = %v, want C = %v", g, coef[i]*g, clip)
		}
	}
}

func checkScaleRows[T Float](t *testing.T) {
	nan, inf := T(math.NaN()), T(math.Inf(1))
	const rows, cols = 5, 3
	a := []T{
		1, 2, 3,
		nan, 1, inf,
		4, 5, 6,
		-inf, nan, 0,
		7, 8, 9,
	}
	orig := slices.Clone(a)
	c := []float64{0.5, 0, 1, 0, -2}
	ScaleRows(a, rows, cols, c)
	for i := range rows {
		for j := range cols {
			got := a[i*cols+j]
			switch {
			case c[i] == 0:
				if got != 0 || math.Signbit(float64(got)) {
					t.Errorf("row %d col %d: %v, want exactly +0", i, j, got)
				}
			default:
				if want := T(c[i]) * orig[i*cols+j]; got != want {
					t.Errorf("row %d col %d: %v, want %v", i, j, got, want)
				}
			}
		}
	}
}

// TestClipScaleRow: every scaled entry is at most c·|e| in magnitude (times 1 + 1.2e-7 where
// float32 rounds to nearest, bit for bit float32(c)·e as the device kernel computes it), and
// exactly at most c·|e|, rounded toward zero, where float32(c) or the product is subnormal —
// the range where a rounded-to-nearest product could exceed c·|e| by a large factor.
func TestClipScaleRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(121, 122))
	exactMul := func(c, v float64) *big.Float {
		return new(big.Float).SetPrec(200).Mul(new(big.Float).SetFloat64(c), new(big.Float).SetFloat64(v))
	}
	abs := func(x *big.Float) *big.Float { return new(big.Float).Abs(x) }
	coefs := []float64{0.5, 0.999, 1e-3, 3e-30, 0x1p-126, 0x1p-126 * 0.75, 1e-40, 1e-43, 1.5e-45, 7e-46, 1e-300}
	for range 200 {
		coefs = append(coefs, math.Exp(-110*rng.Float64()))
	}
	t.Run("float32", func(t *testing.T) {
		src := []float32{1, -1, 3.4e38, -3.4e38, 1e-38, -1e-45, 1.17e-38, 0, float32(math.Copysign(0, -1)), 7}
		for range 300 {
			src = append(src, float32(rng.NormFloat64()*math.Exp(80*(rng.Float64()-0.5))))
		}
		dst := make([]float32, len(src))
		slow := 0
		for _, c := range coefs {
			ClipScaleRow(dst, src, c)
			f := float32(c)
			for j, v := range src {
				got := dst[j]
				ex := exactMul(c, float64(v))
				g := new(big.Float).SetFloat64(float64(got))
				if p := f * v; c >= 0x1p-126 && (p == 0 || math.Abs(float64(p)) >= 0x1p-126) {
					if math.Float32bits(got) != math.Float32bits(p) {
						t.Fatalf("c=%g e=%g: %g, want float32(c)·e = %g", c, v, got, p)
					}
					lim := new(big.Float).Mul(abs(ex), big.NewFloat(1+1.2e-7))
					if abs(g).Cmp(lim) > 0 {
						t.Fatalf("c=%g e=%g: |%g| above (1+1.2e-7)·c·|e|", c, v, got)
					}
					continue
				}
				slow++
				if abs(g).Cmp(abs(ex)) > 0 || (got != 0 && g.Sign() != ex.Sign()) {
					t.Fatalf("c=%g e=%g: %g, exact %s: not toward zero", c, v, got, ex.Text('g', 12))
				}
				// Toward zero, not further: the next float32 away from zero exceeds |c·e|.
				up := math.Nextafter32(got, float32(math.Copysign(math.Inf(1), float64(v))))
				if v != 0 && abs(new(big.Float).SetFloat64(float64(up))).Cmp(abs(ex)) <= 0 {
					t.Fatalf("c=%g e=%g: %g is more than one step below the exact %s", c, v, got, ex.Text('g', 12))
				}
			}
		}
		if slow == 0 {
			t.Fatal("no entry took the toward-zero path")
		}
	})
	t.Run("float64", func(t *testing.T) {
		src := []float64{1, -1, 1.7e308, 1e-300, -5e-324, 2.2250738585072014e-308, 0, 3}
		for range 300 {
			src = append(src, rng.NormFloat64()*math.Exp(700*(rng.Float64()-0.5)))
		}
		dst := make([]float64, len(src))
		for _, c := range coefs {
			ClipScaleRow(dst, src, c)
			for j, v := range src {
				got := dst[j]
				ex := exactMul(c, v)
				g := new(big.Float).SetFloat64(got)
				lim := abs(ex)
				if math.Abs(got) >= 0x1p-1022 {
					ulp := new(big.Float).SetPrec(200).SetMantExp(lim, -53) // u·c·|e|
					lim = new(big.Float).SetPrec(200).Add(lim, ulp)
				}
				if abs(g).Cmp(lim) > 0 {
					t.Fatalf("c=%g e=%g: %g above the bound (exact %s)", c, v, got, ex.Text('g', 17))
				}
			}
		}
	})
	// In place.
	x := []float32{1e-40, 2}
	ClipScaleRow(x, x, 0.5)
	if x[0] != float32(0.5e-40) && x[0] > float32(0.5e-40) || x[1] != 1 {
		t.Fatalf("in place: %v", x)
	}
}

func TestScaleRows(t *testing.T) {
	t.Run("float64", checkScaleRows[float64])
	t.Run("float32", checkScaleRows[float32])
}

// naiveClippedSum materializes each example's gradient aᵢ⊗eᵢ (and eᵢ),
// scales it by cᵢ and sums, in float64, skipping examples with cᵢ = 0. It
// also returns Σᵢ|cᵢ|·|aᵢ⊗eᵢ| entrywise, the scale for relative error bounds.
func naiveClippedSum[T Float](a, e []T, b, d, h int, c []float64) (w, bias, wAbs, bAbs []float64) {
	w, bias = make([]float64, d*h), make([]float64, h)
	wAbs, bAbs = make([]float64, d*h), make([]float64, h)
	g := make([]float64, d*h)
	for i := range b {
		if c[i] == 0 {
			continue
		}
		for p := range d {
			for q := range h {
				g[p*h+q] = float64(a[i*d+p]) * float64(e[i*h+q])
			}
		}
		for k, v := range g {
			w[k] += c[i] * v
			wAbs[k] += math.Abs(c[i] * v)
		}
		for q := range h {
			bias[q] += c[i] * float64(e[i*h+q])
			bAbs[q] += math.Abs(c[i] * float64(e[i*h+q]))
		}
	}
	return w, bias, wAbs, bAbs
}

func checkClippedSum[T Float](t *testing.T, tol float64) {
	rng := rand.New(rand.NewPCG(101, 102))
	nan, inf := T(math.NaN()), T(math.Inf(1))
	type poison struct {
		row   int
		inA   bool
		value T
	}
	cases := []struct {
		name    string
		b, d, h int
		zeroC   []int
		poison  []poison
		noBias  bool
	}{
		{name: "plain", b: 16, d: 11, h: 7},
		{name: "mlp layer", b: 64, d: 78, h: 25, zeroC: []int{3, 60, 61, 62, 63}},
		{name: "NaN in E rows with c=0", b: 20, d: 9, h: 6, zeroC: []int{0, 5, 19}, poison: []poison{{0, false, nan}, {5, false, inf}, {19, false, -inf}}},
		{name: "NaN in A rows with c=0", b: 20, d: 9, h: 6, zeroC: []int{0, 5, 6, 19}, poison: []poison{{0, true, nan}, {5, true, inf}, {6, true, nan}, {19, true, -inf}}},
		{name: "NaN in both, no bias", b: 12, d: 4, h: 3, zeroC: []int{2, 7}, poison: []poison{{2, true, nan}, {2, false, nan}, {7, false, inf}}, noBias: true},
		{name: "all dropped", b: 5, d: 3, h: 2, zeroC: []int{0, 1, 2, 3, 4}, poison: []poison{{1, true, nan}, {4, true, nan}}},
		{name: "single row", b: 1, d: 5, h: 4},
		{name: "empty batch", b: 0, d: 5, h: 4},
	}
	for _, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			b, d, h := cs.b, cs.d, cs.h
			a := randSlice[T](rng, b*d)
			e := randSlice[T](rng, b*h)
			c := make([]float64, b)
			for i := range c {
				c[i] = []float64{1, rng.Float64(), 0.25}[i%3]
			}
			for _, i := range cs.zeroC {
				c[i] = 0
			}
			for _, p := range cs.poison {
				if p.inA {
					a[p.row*d+rng.IntN(d)] = p.value
				} else {
					e[p.row*h+rng.IntN(h)] = p.value
				}
			}
			w, bias, wAbs, bAbs := naiveClippedSum(a, e, b, d, h, c)
			dstW := make([]T, d*h)
			for i := range dstW {
				dstW[i] = nan // must be overwritten
			}
			var dstB []T
			if !cs.noBias {
				dstB = []T{}
				for range h {
					dstB = append(dstB, nan)
				}
			}
			scratch := make([]T, b*h+3)
			ClippedSum(dstW, dstB, a, e, b, d, h, c, scratch)
			for k := range dstW {
				if g := float64(dstW[k]); math.IsNaN(g) || math.Abs(g-w[k]) > tol*wAbs[k] {
					t.Fatalf("W[%d,%d] = %v, naive %v (scale %v)", k/h, k%h, g, w[k], wAbs[k])
				}
			}
			for q := range dstB {
				if g := float64(dstB[q]); math.IsNaN(g) || math.Abs(g-bias[q]) > tol*bAbs[q] {
					t.Fatalf("bias[%d] = %v, naive %v", q, g, bias[q])
				}
			}
		})
	}
}

func TestClippedSum(t *testing.T) {
	t.Run("float64", func(t *testing.T) { checkClippedSum[float64](t, 1e-12) })
	t.Run("float32", func(t *testing.T) { checkClippedSum[float32](t, 1e-5) })
}

// The whole DP step of one dense layer — norms, clip, clipped sum — against
// per-example gradients clipped one by one.
func TestGhostClippingEndToEnd(t *testing.T) {
	rng := rand.New(rand.NewPCG(111, 112))
	const b, d, h, clip = 32, 20, 10, 3.0
	a := randSlice[float64](rng, b*d)
	e := randSlice[float64](rng, b*h)
	mask := make([]float64, b)
	for i := range mask {
		mask[i] = float64(i%5/4 ^ 1) // every fifth example is padding
	}
	asq, esq, norm2, coef := make([]float64, b), make([]float64, b), make([]float64, b), make([]float64, b)
	RowSqNorms(asq, a, b, d)
	RowSqNorms(esq, e, b, h)
	GhostAccum(norm2, asq, esq, true)
	if nf := ClipCoefs(coef, norm2, mask, clip); nf != 0 {
		t.Fatalf("nonFinite = %d", nf)
	}
	dstW, dstB := make([]float64, d*h), make([]float64, h)
	ClippedSum(dstW, dstB, a, e, b, d, h, coef, make([]float64, b*h))

	wantW, wantB := make([]float64, d*h), make([]float64, h)
	clipped := 0
	for i := range b {
		if mask[i] == 0 {
			continue
		}
		g := make([]float64, 0, d*h+h)
		for p := range d {
			for q := range h {
				g = append(g, a[i*d+p]*e[i*h+q])
			}
		}
		g = append(g, e[i*h:(i+1)*h]...)
		nrm := 0.0
		for _, v := range g {
			nrm += v * v
		}
		nrm = math.Sqrt(nrm)
		f := 1.0
		if nrm > clip {
			f = clip / nrm
			clipped++
		}
		for k := range d * h {
			wantW[k] += f * g[k]
		}
		for q := range h {
			wantB[q] += f * g[d*h+q]
		}
	}
	if clipped == 0 || clipped == b {
		t.Fatalf("test data clips %d of %d examples; want a mix", clipped, b)
	}
	for k := range wantW {
		if math.Abs(dstW[k]-wantW[k]) > 1e-12*(1+math.Abs(wantW[k])) {
			t.Fatalf("W[%d] = %v, per-example %v", k, dstW[k], wantW[k])
		}
	}
	for q := range wantB {
		if math.Abs(dstB[q]-wantB[q]) > 1e-12*(1+math.Abs(wantB[q])) {
			t.Fatalf("b[%d] = %v, per-example %v", q, dstB[q], wantB[q])
		}
	}
}

func TestShapePanics(t *testing.T) {
	mustPanic(t, "RowSqNorms short a", func() { RowSqNorms(make([]float64, 2), make([]float64, 5), 2, 3) })
	mustPanic(t, "RowSqNorms short dst", func() { RowSqNorms(make([]float64, 1), make([]float64, 6), 2, 3) })
	mustPanic(t, "RowSqNorms negative", func() { RowSqNorms(make([]float64, 1), make([]float64, 6), -1, 3) })
	mustPanic(t, "GhostAccum short", func() { GhostAccum(make([]float64, 3), make([]float64, 2), make([]float64, 3), true) })
	mustPanic(t, "ScaleRows short c", func() { ScaleRows(make([]float32, 6), 2, 3, []float64{1}) })
	mustPanic(t, "ClippedSum short scratch", func() {
		ClippedSum(make([]float64, 6), nil, make([]float64, 4), make([]float64, 6), 2, 2, 3, []float64{1, 1}, make([]float64, 5))
	})
	mustPanic(t, "ClippedSum short dstB", func() {
		ClippedSum(make([]float64, 6), make([]float64, 2), make([]float64, 4), make([]float64, 6), 2, 2, 3, []float64{1, 1}, make([]float64, 6))
	})
}

// BenchmarkClipScaleRow: the scaling of one physical batch's error rows (256 × 256, float32,
// coefficients of ordinary size) by ClipScaleRow against the plain float32(c)·e loop it
// replaced in ClippedSum, in one binary.
func BenchmarkClipScaleRow(b *testing.B) {
	rng := rand.New(rand.NewPCG(131, 132))
	const rows, cols = 256, 256
	src := randSlice[float32](rng, rows*cols)
	dst := make([]float32, rows*cols)
	c := make([]float64, rows)
	for i := range c {
		c[i] = 0.01 + 0.9*rng.Float64()
	}
	b.Run("nearest", func(b *testing.B) {
		for b.Loop() {
			for i := range rows {
				f := float32(c[i])
				for j, v := range src[i*cols : (i+1)*cols] {
					dst[i*cols+j] = f * v
				}
			}
		}
		reportPerElem(b, rows*cols)
	})
	b.Run("clip", func(b *testing.B) {
		for b.Loop() {
			for i := range rows {
				ClipScaleRow(dst[i*cols:(i+1)*cols], src[i*cols:(i+1)*cols], c[i])
			}
		}
		reportPerElem(b, rows*cols)
	})
}

// BenchmarkSqNormFloat32: SqNorm's fixed-order float64 sum against gonum's Dsdot, which it
// replaced in RowSqNorms (its SIMD loop made the result depend on the row's alignment).
func BenchmarkSqNormFloat32(b *testing.B) {
	rng := rand.New(rand.NewPCG(133, 134))
	const rows, cols = 256, 784
	a := randSlice[float32](rng, rows*cols)
	dst := make([]float64, rows)
	b.Run("dsdot", func(b *testing.B) {
		var impl gonum.Implementation
		for b.Loop() {
			for i := range rows {
				r := a[i*cols : (i+1)*cols]
				dst[i] = impl.Dsdot(cols, r, 1, r, 1)
			}
		}
		reportPerElem(b, rows*cols)
	})
	b.Run("fixed", func(b *testing.B) {
		for b.Loop() {
			RowSqNorms(dst, a, rows, cols)
		}
		reportPerElem(b, rows*cols)
	})
}

// TestClipBound: the margin covers the rounding it is for — a float32 row scaled and
// multiplied with round-to-nearest ((1 + 2⁻²⁴)²) after a float64 norm within 2⁻³⁰ stays below
// C, and the float64 analogue too — while costing less than a millionth of C; +Inf stays.
func TestClipBound(t *testing.T) {
	for _, c := range []float64{1e-6, 1, 3.5, 1e6} {
		b32, b64 := ClipBound[float32](c), ClipBound[float64](c)
		if worst := b32 * (1 + 0x1p-24) * (1 + 0x1p-24) * (1 + 0x1p-30); !(worst <= c) || !(b32 > c*(1-1e-6)) {
			t.Errorf("float32: bound %v for C = %v: worst case %v", b32, c, worst)
		}
		if worst := b64 * (1 + 0x1p-53) * (1 + 0x1p-53) * (1 + 0x1p-30); !(worst <= c) || !(b64 > c*(1-1e-8)) {
			t.Errorf("float64: bound %v for C = %v: worst case %v", b64, c, worst)
		}
	}
	if !math.IsInf(ClipBound[float32](math.Inf(1)), 1) {
		t.Errorf("ClipBound(+Inf) is not +Inf")
	}
}

// TestClippedSumWide: the float64 sums of float32 inputs equal a float64 ClippedSum over the
// widened activations and the error rows scaled in float32 (bit for bit: the same GEMM), and
// a dropped row with non-finite activations contributes nothing.
func TestClippedSumWide(t *testing.T) {
	const b, d, h = 9, 5, 3
	r := rand.New(rand.NewPCG(3, 4))
	a, e := make([]float32, b*d), make([]float32, b*h)
	for i := range a {
		a[i] = float32(r.NormFloat64())
	}
	for i := range e {
		e[i] = float32(r.NormFloat64())
	}
	c := []float64{1, 0.3, 0, 1, 0.01, 0.7, 0, 1, 0.5}
	a[2*d+1] = float32(math.NaN()) // dropped row
	w, bias := make([]float64, d*h), make([]float64, h)
	ClippedSumWide(w, bias, a, e, b, d, h, c, make([]float32, b*h), make([]float64, b*(d+h)))
	s := make([]float32, b*h)
	ClippedSum(make([]float32, d*h), make([]float32, h), a, e, b, d, h, c, s)
	wa, ws, c01 := make([]float64, b*d), make([]float64, b*h), make([]float64, b)
	for i, v := range a {
		wa[i] = float64(v)
	}
	for i, v := range s {
		ws[i] = float64(v)
	}
	for i, ci := range c {
		if ci != 0 {
			c01[i] = 1
		}
	}
	ww, wb := make([]float64, d*h), make([]float64, h)
	ClippedSum(ww, wb, wa, ws, b, d, h, c01, make([]float64, b*h))
	for j := range ww {
		if math.Float64bits(w[j]) != math.Float64bits(ww[j]) || math.IsNaN(w[j]) {
			t.Fatalf("w[%d] = %v, want %v", j, w[j], ww[j])
		}
	}
	for j := range wb {
		if math.Float64bits(bias[j]) != math.Float64bits(wb[j]) {
			t.Fatalf("bias[%d] = %v, want %v", j, bias[j], wb[j])
		}
	}
	// float64 T: ClippedSum itself.
	w64, b64 := make([]float64, d*h), make([]float64, h)
	ClippedSumWide(w64, b64, wa, ws, b, d, h, c, make([]float64, b*h), nil)
	ClippedSum(ww, wb, wa, ws, b, d, h, c, make([]float64, b*h))
	for j := range ww {
		if math.Float64bits(w64[j]) != math.Float64bits(ww[j]) {
			t.Fatalf("float64 w[%d] = %v, want %v", j, w64[j], ww[j])
		}
	}
}
