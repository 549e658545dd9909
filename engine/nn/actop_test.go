package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestActOpMatchesGorgonia: actOp and its gradient give the bits of Gorgonia's Tanh and
// Rectify and of their gradients (the oracle's ops), in float32 and float64, on inputs that
// include 0, negative values and NaN, except float32's tanh, which is tanh32 (within 2 ulp of
// Gorgonia's); the loss is Σ y⊙c so that ∂L/∂y = c is not all ones.
func TestActOpMatchesGorgonia(t *testing.T) {
	const r, c = 5, 7
	rng := rand.New(rand.NewPCG(9, 9))
	zs, cs := make([]float64, r*c), make([]float64, r*c)
	for i := range zs {
		zs[i], cs[i] = 2*rng.NormFloat64(), rng.NormFloat64()
	}
	zs[0], zs[1], zs[2], zs[3] = 0, math.Copysign(0, -1), -1.5, math.NaN()
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		for _, act := range []Activation{ReLU, Tanh} {
			mk := func(v []float64) *tensor.Dense {
				if dt == tensor.Float64 {
					return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(append([]float64(nil), v...)))
				}
				f := make([]float32, len(v))
				for i, x := range v {
					f[i] = float32(x)
				}
				return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(f))
			}
			// Gorgonia's ops.
			g := G.NewGraph()
			z := G.NewMatrix(g, dt, G.WithShape(r, c), G.WithName("z"), G.WithValue(mk(zs)))
			cn := G.NewMatrix(g, dt, G.WithShape(r, c), G.WithName("c"), G.WithValue(mk(cs)))
			var y *G.Node
			var err error
			if act == ReLU {
				y, err = G.Rectify(z)
			} else {
				y, err = G.Tanh(z)
			}
			if err != nil {
				t.Fatal(err)
			}
			prod, err := G.HadamardProd(y, cn)
			if err != nil {
				t.Fatal(err)
			}
			loss, err := G.Sum(prod)
			if err != nil {
				t.Fatal(err)
			}
			grads, err := G.Grad(loss, z)
			if err != nil {
				t.Fatal(err)
			}
			var yv, dzv G.Value
			G.Read(y, &yv)
			G.Read(grads[0], &dzv)
			vm := G.NewTapeMachine(g)
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			vm.Close()
			// actOp.
			op, err := newActOp(act, tensor.Shape{r, c})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second run reuses the buffers
				y2, err := op.Do(mk(zs))
				if err != nil {
					t.Fatal(err)
				}
				from := mk(zs)
				if act == Tanh {
					from = y2.(*tensor.Dense)
				}
				dz2, err := (&actDiffOp{fwd: op}).Do(from, mk(cs))
				if err != nil {
					t.Fatal(err)
				}
				if act == Tanh && dt == tensor.Float32 {
					// float32 tanh is tanh32, not chewxy/math32's: within 2 ulp of Gorgonia's
					// values (math32's Tanh is not correctly rounded either), and the gradient
					// Gorgonia's ops would form from tanh32's y, bit for bit.
					gy, y := yv.(tensor.Tensor).Data().([]float32), y2.Data().([]float32)
					dz, cv := dz2.Data().([]float32), mk(cs).Data().([]float32)
					for i, z := range mk(zs).Data().([]float32) {
						if math.Float32bits(y[i]) != math.Float32bits(tanh32(z)) {
							t.Fatalf("tanh float32 y[%d] = %v, tanh32 %v", i, y[i], tanh32(z))
						}
						if z == z && ulpDiff(y[i], gy[i]) > 2 {
							t.Fatalf("tanh float32 y[%d] = %v, Gorgonia %v: more than 2 ulp", i, y[i], gy[i])
						}
						sq := y[i] * y[i]
						d := 1 - sq
						if want := d * cv[i]; math.Float32bits(dz[i]) != math.Float32bits(want) && !(want != want && dz[i] != dz[i]) {
							t.Fatalf("tanh float32 ∂L/∂z[%d] = %v, want %v", i, dz[i], want)
						}
					}
					continue
				}
				sameBits(t, string(act)+" "+dt.String()+" y", yv.(tensor.Tensor).Data(), y2.Data())
				sameBits(t, string(act)+" "+dt.String()+" ∂L/∂z", dzv.(tensor.Tensor).Data(), dz2.Data())
			}
		}
	}
	if _, err := newActOp("sigmoid", tensor.Shape{2, 2}); err == nil {
		t.Error("sigmoid accepted")
	}
	if _, err := newActOp(Tanh, tensor.Shape{4}); err == nil {
		t.Error("a vector shape accepted")
	}
}

func sameBits(t *testing.T, name string, want, got any) {
	t.Helper()
	switch w := want.(type) {
	case []float32:
		g := got.([]float32)
		for i := range w {
			if math.Float32bits(w[i]) != math.Float32bits(g[i]) && !(w[i] != w[i] && g[i] != g[i]) {
				t.Fatalf("%s[%d] = %v, Gorgonia %v", name, i, g[i], w[i])
			}
		}
	case []float64:
		g := got.([]float64)
		for i := range w {
			if math.Float64bits(w[i]) != math.Float64bits(g[i]) && !(w[i] != w[i] && g[i] != g[i]) {
				t.Fatalf("%s[%d] = %v, Gorgonia %v", name, i, g[i], w[i])
			}
		}
	default:
		t.Fatalf("%s: data %T", name, want)
	}
}
