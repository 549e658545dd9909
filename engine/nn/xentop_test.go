package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// xentProblem draws b×k logits of scale `scale` and one-hot labels; row `pad` (if ≥ 0) is a
// padding row with all-zero labels.
func xentProblem(r *rand.Rand, b, k int, scale float64, pad int) (z, y []float64) {
	z, y = make([]float64, b*k), make([]float64, b*k)
	for i := range z {
		z[i] = scale * r.NormFloat64()
	}
	for i := range b {
		if i != pad {
			y[i*k+r.IntN(k)] = 1
		}
	}
	return z, y
}

// naiveXent is the float64 reference: ℓᵢ = −Σₖ yᵢₖ·log softmax(zᵢ)ₖ with the row's own maximum,
// and ∂ℓᵢ/∂zᵢ = softmax(zᵢ)·Σₖ yᵢₖ − yᵢ.
func naiveXent(z, y []float64, b, k int) (loss float64, grad []float64) {
	grad = make([]float64, b*k)
	for i := range b {
		zi, yi := z[i*k:(i+1)*k], y[i*k:(i+1)*k]
		m := math.Inf(-1)
		for _, v := range zi {
			m = math.Max(m, v)
		}
		var s, sy float64
		for j, v := range zi {
			s += math.Exp(v - m)
			sy += yi[j]
		}
		for j, v := range zi {
			logp := v - m - math.Log(s)
			if yi[j] != 0 {
				loss -= yi[j] * logp
			}
			grad[i*k+j] = math.Exp(logp)*sy - yi[j]
		}
	}
	return loss, grad
}

func to32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

func from32(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// TestXentMatchesReference: loss and gradient against the naive float64 reference, in float64
// and in float32 (whose inputs the reference reads widened), over logit scales from tiny to
// large, with a padding row.
func TestXentMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, scale := range []float64{1e-3, 1, 10, 80} {
		const b, k = 7, 5
		z, y := xentProblem(r, b, k, scale, 3)
		wantLoss, wantGrad := naiveXent(z, y, b, k)
		loss := xentLoss(z, y, b, k)
		grad := make([]float64, b*k)
		xentGrad(grad, z, y, b, k, 1)
		if math.Abs(loss-wantLoss) > 1e-13*math.Abs(wantLoss) {
			t.Errorf("float64 scale %g: loss %v, reference %v", scale, loss, wantLoss)
		}
		for j := range grad {
			if math.Abs(grad[j]-wantGrad[j]) > 1e-15 {
				t.Errorf("float64 scale %g: grad[%d] = %v, reference %v", scale, j, grad[j], wantGrad[j])
			}
		}
		// float32: the reference on the float32 inputs, widened.
		z32, y32 := to32(z), to32(y)
		wantLoss, wantGrad = naiveXent(from32(z32), from32(y32), b, k)
		loss32 := float64(float32(xentLoss(z32, y32, b, k)))
		grad32 := make([]float32, b*k)
		xentGrad(grad32, z32, y32, b, k, 1)
		if math.Abs(loss32-wantLoss) > 1e-7*math.Abs(wantLoss) {
			t.Errorf("float32 scale %g: loss %v, reference %v", scale, loss32, wantLoss)
		}
		for j, g := range grad32 {
			if math.Abs(float64(g)-wantGrad[j]) > 6e-8 {
				t.Errorf("float32 scale %g: grad[%d] = %v, reference %v", scale, j, g, wantGrad[j])
			}
		}
		for j := 3 * k; j < 4*k; j++ {
			if grad[j] != 0 || grad32[j] != 0 {
				t.Errorf("padding row: gradient %v / %v", grad[j], grad32[j])
			}
		}
	}
}

// TestXentFiniteDifferences: the gradient op against central differences of the loss, with
// soft labels and an upstream gradient g ≠ 1.
func TestXentFiniteDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const b, k, g = 4, 6, 2.5
	z, y := xentProblem(r, b, k, 2, 1)
	y[2*k], y[2*k+1] = 0.3, 0.7 // a soft label
	grad := make([]float64, b*k)
	xentGrad(grad, z, y, b, k, g)
	const h = 1e-6
	for j := range z {
		zp, zm := append([]float64(nil), z...), append([]float64(nil), z...)
		zp[j] += h
		zm[j] -= h
		fd := g * (xentLoss(zp, y, b, k) - xentLoss(zm, y, b, k)) / (2 * h)
		if math.Abs(fd-grad[j]) > 1e-8 {
			t.Errorf("∂L/∂z[%d]: op %v, central difference %v", j, grad[j], fd)
		}
	}
}

// xentGraph builds L(Z) on a b×k graph with the op (ours) or Gorgonia's LogSoftMax path and
// returns the loss and ∂L/∂Z.
func xentGraph(t *testing.T, dt tensor.Dtype, zv, yv *tensor.Dense, ours bool) (float64, []float64) {
	t.Helper()
	s := zv.Shape()
	g := G.NewGraph()
	z := G.NewMatrix(g, dt, G.WithShape(s[0], s[1]), G.WithName("z"), G.WithValue(zv))
	y := G.NewMatrix(g, dt, G.WithShape(s[0], s[1]), G.WithName("y"), G.WithValue(yv))
	n := &Net{y: y, oracle: !ours}
	loss, err := n.lossNode(z)
	if err != nil {
		t.Fatal(err)
	}
	grads, err := G.Grad(loss, z)
	if err != nil {
		t.Fatal(err)
	}
	var lv, gv G.Value
	G.Read(loss, &lv)
	G.Read(grads[0], &gv)
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	var l float64
	switch v := lv.Data().(type) {
	case float32:
		l = float64(v)
	case float64:
		l = v
	}
	switch d := gv.Data().(type) {
	case []float32:
		return l, from32(d)
	case []float64:
		return l, append([]float64(nil), d...)
	}
	t.Fatalf("gradient value %T", gv.Data())
	return 0, nil
}

// TestXentMatchesGorgonia: on benign inputs the op gives the loss and gradient of the graph it
// replaced, −Σ y ⊙ LogSoftMax(Z), through Gorgonia's own differentiation.
func TestXentMatchesGorgonia(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const b, k = 6, 4
	z, y := xentProblem(r, b, k, 3, 5)
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		mk := func(x []float64) *tensor.Dense {
			if dt == tensor.Float32 {
				return tensor.New(tensor.WithShape(b, k), tensor.WithBacking(to32(x)))
			}
			return tensor.New(tensor.WithShape(b, k), tensor.WithBacking(append([]float64(nil), x...)))
		}
		lo, go_ := xentGraph(t, dt, mk(z), mk(y), true)
		lg, gg := xentGraph(t, dt, mk(z), mk(y), false)
		tol := 1e-13
		if dt == tensor.Float32 {
			tol = 2e-6
		}
		if math.Abs(lo-lg) > tol*math.Abs(lg) {
			t.Errorf("%v: loss %v, Gorgonia %v", dt, lo, lg)
		}
		for j := range gg {
			if math.Abs(go_[j]-gg[j]) > tol {
				t.Errorf("%v: ∂L/∂z[%d] = %v, Gorgonia %v", dt, j, go_[j], gg[j])
			}
		}
	}
}

// TestXentRowsIndependent: whatever row 0 holds — NaN, ±Inf, a logit far above the others —
// every other row's loss term and error are those it has alone, bit for bit; a padding row
// gets zero loss and zero error whatever its logits; a NaN or +Inf row has a NaN error.
func TestXentRowsIndependent(t *testing.T) {
	const k = 3
	nan, inf := math.NaN(), math.Inf(1)
	others := []float64{0.5, -1, 2, 800, 790, -3, -inf, 0, 1, 1e-300, 5e-324, 0}
	othersY := []float64{0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0} // row 2 is padding
	for _, row0 := range [][]float64{{nan, 0, 0}, {0, nan, 0}, {inf, 0, 0}, {-inf, -inf, -inf}, {1e30, 0, 0}, {1e4, -1e4, 0}, {1.7e308, -1.7e308, 0}} {
		z := append(append([]float64(nil), row0...), others...)
		y := append([]float64{1, 0, 0}, othersY...)
		b := len(z) / k
		for _, dt := range []string{"float64", "float32"} {
			grad := make([]float64, b*k)
			var loss float64
			alone := func(i int) (float64, []float64) {
				zi, yi := z[i*k:(i+1)*k], y[i*k:(i+1)*k]
				gi := make([]float64, k)
				if dt == "float32" {
					g32 := make([]float32, k)
					xentGrad(g32, to32(zi), to32(yi), 1, k, 1)
					return xentLoss(to32(zi), to32(yi), 1, k), from32(g32)
				}
				xentGrad(gi, zi, yi, 1, k, 1)
				return xentLoss(zi, yi, 1, k), gi
			}
			if dt == "float32" {
				g32 := make([]float32, b*k)
				xentGrad(g32, to32(z), to32(y), b, k, 1)
				grad = from32(g32)
				loss = xentLoss(to32(z), to32(y), b, k)
			} else {
				xentGrad(grad, z, y, b, k, 1)
				loss = xentLoss(z, y, b, k)
			}
			var rest float64
			for i := 1; i < b; i++ {
				li, gi := alone(i)
				rest += li
				for j := range k {
					if math.Float64bits(grad[i*k+j]) != math.Float64bits(gi[j]) {
						t.Fatalf("%s row0 %v: row %d error %v, alone %v", dt, row0, i, grad[i*k:(i+1)*k], gi)
					}
				}
			}
			if math.IsInf(rest, 0) || math.IsNaN(rest) {
				t.Fatalf("%s row0 %v: the other rows' loss %v", dt, row0, rest)
			}
			// Row 2 is padding (all-zero label) with logits 800, 790, −3: nothing.
			for j := range k {
				if grad[2*k+j] != 0 || math.Signbit(grad[2*k+j]) {
					t.Fatalf("%s: padding row error %v", dt, grad[2*k:3*k])
				}
			}
			l0, g0 := alone(0)
			if want := l0 + rest; !(loss == want || math.IsNaN(loss) && math.IsNaN(want)) && math.Abs(loss-want) > 1e-12*math.Abs(want) {
				t.Fatalf("%s row0 %v: loss %v, rows alone %v", dt, row0, loss, want)
			}
			r0 := row0
			if dt == "float32" {
				r0 = from32(to32(row0)) // ±1.7e308 overflow to ±Inf
			}
			finite := !math.IsNaN(r0[0]) && !math.IsNaN(r0[1]) && !math.IsInf(r0[0], 1) && !math.IsInf(r0[2], -1)
			for _, v := range g0 {
				if finite != !math.IsNaN(v) {
					t.Fatalf("%s row0 %v: its own error %v", dt, row0, g0)
				}
			}
		}
	}
}

// TestXentPaddingRowLogitsIgnored: a padding row's logits are not read: NaN there changes
// neither the loss nor any error.
func TestXentPaddingRowLogitsIgnored(t *testing.T) {
	z := []float64{1, 2, math.NaN(), math.Inf(1), 0.5, -0.5}
	y := []float64{0, 1, 0, 0, 1, 0}
	grad := make([]float64, 6)
	xentGrad(grad, z, y, 3, 2, 1)
	l := xentLoss(z, y, 3, 2)
	if math.IsNaN(l) || grad[2] != 0 || grad[3] != 0 || math.IsNaN(grad[0]) || math.IsNaN(grad[4]) {
		t.Fatalf("loss %v, errors %v", l, grad)
	}
}

// TestTrainingNetLossMatchesGorgonia: a training net's loss (our op) equals the loss of the
// same batch through the LogSoftMax graph, and its output-layer errors equal Gorgonia's
// gradient of that graph with respect to the logits, on benign inputs.
func TestTrainingNetLossMatchesGorgonia(t *testing.T) {
	arch := MLP([]int{5}, 4, []int{6}, Tanh)
	for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
		params, err := NewParams(arch, dt, 3)
		if err != nil {
			t.Fatal(err)
		}
		const b = 5
		net, err := Build(arch, params, b, true)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(11, 12))
		xs, ys := make([]float64, b*5), make([]float64, b*4)
		for i := range xs {
			xs[i] = r.NormFloat64()
		}
		for i := range b - 1 { // the last row is padding
			ys[i*4+r.IntN(4)] = 1
		}
		mk := func(x []float64, cols int) *tensor.Dense {
			if dt == tensor.Float32 {
				return tensor.New(tensor.WithShape(b, cols), tensor.WithBacking(to32(x)))
			}
			return tensor.New(tensor.WithShape(b, cols), tensor.WithBacking(append([]float64(nil), x...)))
		}
		if err := net.Run(mk(xs, 5), mk(ys, 4)); err != nil {
			t.Fatal(err)
		}
		var logits []float64
		switch d := net.Logits().Data().(type) {
		case []float32:
			logits = from32(d)
		case []float64:
			logits = append([]float64(nil), d...)
		}
		lg, gg := xentGraph(t, dt, mk(logits, 4), mk(ys, 4), false)
		tol := 1e-13
		if dt == tensor.Float32 {
			tol = 2e-6
		}
		if l := net.Loss(); math.Abs(l-lg) > tol*math.Abs(lg) {
			t.Errorf("%v: net loss %v, LogSoftMax graph %v", dt, l, lg)
		}
		taps := net.Taps()
		var e []float64
		switch d := taps[len(taps)-1].E().Data().(type) {
		case []float32:
			e = from32(d)
		case []float64:
			e = d
		}
		for j := range gg {
			if math.Abs(e[j]-gg[j]) > tol {
				t.Errorf("%v: output error[%d] = %v, Gorgonia %v", dt, j, e[j], gg[j])
			}
		}
		net.Close()
	}
}
