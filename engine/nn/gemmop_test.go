package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"
)

// TestGemmOp: gemmOp's Z = A·W + b and gemmDiffOp's ∂L/∂A = ∂L/∂Z·Wᵀ against sums written out
// in float64, in both dtypes; the op refuses wrong arities and shapes, and it is
// differentiable with respect to A only, and only when asked.
func TestGemmOp(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const m, k, n = 7, 5, 3
	a, w, b, dz := make([]float64, m*k), make([]float64, k*n), make([]float64, n), make([]float64, m*n)
	for _, s := range [][]float64{a, w, b, dz} {
		for i := range s {
			s[i] = rng.NormFloat64()
		}
	}
	wantZ, wantDA := make([]float64, m*n), make([]float64, m*k)
	for i := range m {
		for j := range n {
			z := b[j]
			for l := range k {
				z += a[i*k+l] * w[l*n+j]
				wantDA[i*k+l] += dz[i*n+j] * w[l*n+j]
			}
			wantZ[i*n+j] = z
		}
	}
	check := func(name string, got []float64, want []float64, tol float64) {
		t.Helper()
		for i := range want {
			if math.Abs(got[i]-want[i]) > tol*(1+math.Abs(want[i])) {
				t.Fatalf("%s[%d] = %v, want %v", name, i, got[i], want[i])
			}
		}
	}
	op := newGemmOp(m, k, n, true)
	diff := &gemmDiffOp{fwd: op}
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		mk := func(v []float64, r, c int) *tensor.Dense {
			if dt == tensor.Float64 {
				return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(append([]float64(nil), v...)))
			}
			f := make([]float32, len(v))
			for i, x := range v {
				f[i] = float32(x)
			}
			return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(f))
		}
		asF64 := func(v any) []float64 {
			switch d := v.(type) {
			case []float64:
				return d
			case []float32:
				o := make([]float64, len(d))
				for i, x := range d {
					o[i] = float64(x)
				}
				return o
			}
			t.Fatalf("data %T", v)
			return nil
		}
		tol := 1e-12
		if dt == tensor.Float32 {
			tol = 1e-5
		}
		for range 2 { // the second run reuses the op's buffers
			z, err := op.Do(mk(a, m, k), mk(w, k, n), mk(b, 1, n))
			if err != nil {
				t.Fatal(err)
			}
			check(dt.String()+" Z", asF64(z.Data()), wantZ, tol)
			da, err := diff.Do(mk(dz, m, n), mk(w, k, n))
			if err != nil {
				t.Fatal(err)
			}
			check(dt.String()+" ∂L/∂A", asF64(da.Data()), wantDA, tol)
		}
	}
	if _, err := op.Do(mk64(a, m, k), mk64(w, k, n)); err == nil {
		t.Fatal("two inputs accepted")
	}
	if _, err := op.Do(mk64(a, m, k), mk64(w, k, n), mk64(b[:2], 1, 2)); err == nil {
		t.Fatal("a 2-wide bias accepted for 3 outputs")
	}
	if _, err := diff.Do(mk64(dz, m, n)); err == nil {
		t.Fatal("gradient op: one input accepted")
	}
	if d := op.DiffWRT(3); !d[0] || d[1] || d[2] {
		t.Fatalf("DiffWRT = %v, want [true false false]", d)
	}
	if d := newGemmOp(m, k, n, false).DiffWRT(3); d[0] || d[1] || d[2] {
		t.Fatalf("first layer: DiffWRT = %v, want all false", d)
	}
}

func mk64(v []float64, r, c int) *tensor.Dense {
	return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(append([]float64(nil), v...)))
}
