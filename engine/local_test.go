package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

func learnerConfig(arch nn.Arch, dt tensor.Dtype) Config {
	return Config{Arch: arch, Dtype: dt, PhysicalBatch: 16, Replicas: 2, Clip: 0.7, Seed: 11,
		Optimizer: OptimizerConfig{Name: "momentum", LR: 0.3, Momentum: 0.9}}
}

// TestLearnerMatchesRunStep: Learner.Step with the run's σ, noise stream and learning rate is
// bit for bit the training loop's step (same clipping, noise, normalization and optimizer), for
// both dtypes and over several steps with momentum.
func TestLearnerMatchesRunStep(t *testing.T) {
	arch := nn.MLP([]int{6}, 3, []int{5}, nn.Tanh)
	ds := randomDataset(arch, 200, 3)
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		cfg := learnerConfig(arch, dt)
		cfg.Sigma = 1.3
		ref := cfg
		ref.Epochs = 1
		if err := ref.Validate(); err != nil {
			t.Fatal(err)
		}
		l, err := NewLearner(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []float64
		if dt == tensor.Float64 {
			r, err := newRun[float64](ref)
			if err != nil {
				t.Fatal(err)
			}
			want = runSteps(t, r, l, ds)
			r.close()
		} else {
			r, err := newRun[float32](ref)
			if err != nil {
				t.Fatal(err)
			}
			want = runSteps(t, r, l, ds)
			r.close()
		}
		got = mustParams(t, l)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%v: parameter %d: learner %v, run.step %v", dt, i, got[i], want[i])
			}
		}
		l.Close()
	}
}

func runSteps[T kernels.Float](t *testing.T, r *run[T], l *Learner, ds *datasets.Dataset) []float64 {
	rng := rand.New(rand.NewPCG(5, 6))
	idx := make([]int, 37) // three physical batches, the last one padded
	for s := range 4 {
		for j := range idx {
			idx[j] = rng.IntN(ds.N)
		}
		if _, err := r.step(ds, idx, s, 4, 40); err != nil {
			t.Fatal(err)
		}
		key := kernels.NoiseKey{Seed: r.noise, Step: uint64(s)}
		if _, err := l.Step(ds, idx, r.cfg.Sigma, key, r.cfg.Optimizer.LR, 40); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]float64, 0)
	for _, p := range paramSlices[T](r.params) {
		for _, v := range p {
			out = append(out, float64(v))
		}
	}
	return out
}

// TestLearnerLogRegOracle: for multinomial logistic regression in float64 the step is computed
// independently by hand: softmax(xW + b) − y times [x, 1] per example, clipped to C, summed,
// divided by the expected batch, one SGD update. No noise (σ = 0).
func TestLearnerLogRegOracle(t *testing.T) {
	arch := nn.LogReg([]int{4}, 3)
	ds := randomDataset(arch, 50, 9)
	cfg := learnerConfig(arch, tensor.Float64)
	cfg.Optimizer = OptimizerConfig{Name: "sgd", LR: 1}
	l, err := NewLearner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	theta := make([]float64, l.NumParams()) // W (4×3) then b (1×3)
	for i := range theta {
		theta[i] = rng.NormFloat64()
	}
	if err := l.SetParams(theta); err != nil {
		t.Fatal(err)
	}
	idx := []int{3, 3, 17, 40, 0, 22, 9, 11, 48, 30, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 18}
	const lr, expected = 0.4, 25.0
	if _, err := l.Step(ds, idx, 0, kernels.NoiseKey{}, lr, expected); err != nil {
		t.Fatal(err)
	}
	sum := make([]float64, 15)
	clipped := 0
	for _, i := range idx {
		x := ds.Row(i)
		var z [3]float64
		for k := range 3 {
			z[k] = theta[12+k]
			for j := range 4 {
				z[k] += float64(x[j]) * theta[j*3+k]
			}
		}
		mx := math.Max(z[0], math.Max(z[1], z[2]))
		var s float64
		for k := range 3 {
			z[k] = math.Exp(z[k] - mx)
			s += z[k]
		}
		g := make([]float64, 15)
		for k := range 3 {
			e := z[k] / s
			if k == ds.Y[i] {
				e--
			}
			for j := range 4 {
				g[j*3+k] = float64(x[j]) * e
			}
			g[12+k] = e
		}
		var n2 float64
		for _, v := range g {
			n2 += v * v
		}
		// Clipped to C, aiming at C less the float margin, as documented (kernels.ClipBound).
		c := math.Min(1, kernels.ClipBound[float64](cfg.Clip)/math.Sqrt(n2))
		if c < 1 {
			clipped++
		}
		for j, v := range g {
			sum[j] += c * v
		}
	}
	if clipped == 0 || clipped == len(idx) {
		t.Fatalf("the test wants some but not all examples clipped, got %d of %d", clipped, len(idx))
	}
	got := mustParams(t, l)
	for j := range theta {
		want := theta[j] - lr*sum[j]/expected
		if math.Abs(got[j]-want) > 1e-12 {
			t.Errorf("parameter %d: got %.15g, want %.15g", j, got[j], want)
		}
	}
}

// TestLearnerNoise: on an empty batch the gradient is zero, so one SGD step at lr 1 and expected
// batch 1 moves every parameter by exactly −σ·C·z, z the kernel's stream for (key, tensor);
// the empirical standard deviation is σ·C.
func TestLearnerNoise(t *testing.T) {
	arch := nn.MLP([]int{30}, 4, []int{20}, nn.Tanh)
	ds := randomDataset(arch, 10, 2)
	cfg := learnerConfig(arch, tensor.Float64)
	cfg.Optimizer = OptimizerConfig{Name: "sgd", LR: 1}
	l, err := NewLearner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	before := mustParams(t, l)
	const sigma = 2.5
	key := kernels.NoiseKey{Seed: 99, Step: 7, Tensor: 1234} // Tensor is replaced by the parameter index
	if _, err := l.Step(ds, nil, sigma, key, 1, 1); err != nil {
		t.Fatal(err)
	}
	after := mustParams(t, l)
	shapes, _ := arch.Layers()
	k := 0
	var ss float64
	for p := range 2 * len(shapes) {
		n := shapes[p/2].Out
		if p%2 == 0 {
			n *= shapes[p/2].In
		}
		for j := range n {
			z := kernels.NoiseKey{Seed: 99, Step: 7, Tensor: uint32(p)}.Normal(uint64(j))
			d := before[k] - after[k]
			if math.Abs(d-sigma*cfg.Clip*z) > 1e-12 {
				t.Fatalf("tensor %d element %d: moved by %v, want σ·C·z = %v", p, j, d, sigma*cfg.Clip*z)
			}
			ss += d * d
			k++
		}
	}
	if k != len(before) {
		t.Fatalf("walked %d parameters, have %d", k, len(before))
	}
	sd := math.Sqrt(ss / float64(k))
	if want := sigma * cfg.Clip; math.Abs(sd-want) > 4*want/math.Sqrt(2*float64(k)) {
		t.Errorf("noise standard deviation %v, want %v", sd, want)
	}
}

// TestLearnerNonPrivate: a non-private learner does not clip (the step equals the clipped one
// with an infinite clip norm, computed by a private learner on huge C) and refuses σ > 0.
func TestLearnerNonPrivate(t *testing.T) {
	arch := nn.MLP([]int{6}, 3, []int{5}, nn.Tanh)
	ds := randomDataset(arch, 100, 4)
	cfg := learnerConfig(arch, tensor.Float64)
	np := cfg
	np.NonPrivate = true
	big := cfg
	big.Clip = 1e300
	a, err := NewLearner(np)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewLearner(big)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	idx := []int{1, 2, 3, 50, 60, 70, 99}
	if _, err := a.Step(ds, idx, 1, kernels.NoiseKey{}, 0.1, 7); err == nil {
		t.Error("non-private learner accepted σ = 1")
	}
	sa, err := a.Step(ds, idx, 0, kernels.NoiseKey{}, 0.1, 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Step(ds, idx, 0, kernels.NoiseKey{}, 0.1, 7); err != nil {
		t.Fatal(err)
	}
	if sa.Clipped != 0 || sa.BatchSize != len(idx) {
		t.Errorf("non-private stats %+v: want no clipping and batch %d", sa, len(idx))
	}
	pa, pb := mustParams(t, a), mustParams(t, b)
	for i := range pa {
		if math.Abs(pa[i]-pb[i]) > 1e-12 {
			t.Fatalf("parameter %d: non-private %v, clip 1e300 %v", i, pa[i], pb[i])
		}
	}
	// And clipping does matter on this problem: with C = 0.01 the step differs.
	small := cfg
	small.Clip = 0.01
	c, err := NewLearner(small)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Step(ds, idx, 0, kernels.NoiseKey{}, 0.1, 7); err != nil {
		t.Fatal(err)
	}
	pc := mustParams(t, c)
	same := true
	for i := range pa {
		if math.Abs(pa[i]-pc[i]) > 1e-9 {
			same = false
		}
	}
	if same {
		t.Error("clip 0.01 gave the non-private step")
	}
}

// TestLearnerParamsAndReset: SetParams/Params round-trip; after ResetOptimizer and SetParams a
// learner repeats a momentum trajectory exactly; bad input is refused without a panic.
func TestLearnerParamsAndReset(t *testing.T) {
	arch := nn.MLP([]int{6}, 3, []int{5}, nn.Tanh)
	ds := randomDataset(arch, 60, 8)
	l, err := NewLearner(learnerConfig(arch, tensor.Float32))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p0 := mustParams(t, l)
	if len(p0) != arch.NumParams() {
		t.Fatalf("NumParams %d, arch says %d", len(p0), arch.NumParams())
	}
	traj := func() []float64 {
		for s := range 3 {
			if _, err := l.Step(ds, []int{s, s + 1, s + 2, 30, 40}, 0.5, kernels.NoiseKey{Seed: 1, Step: uint64(s)}, 0.2, 5); err != nil {
				t.Fatal(err)
			}
		}
		return mustParams(t, l)
	}
	first := traj()
	if err := l.SetParams(p0); err != nil {
		t.Fatal(err)
	}
	if err := l.ResetOptimizer(); err != nil {
		t.Fatal(err)
	}
	second := traj()
	for i := range first {
		if first[i] != second[i] {
			t.Fatalf("parameter %d: %v then %v after reset", i, first[i], second[i])
		}
	}
	if err := l.SetParams(p0[:3]); err == nil {
		t.Error("SetParams accepted a short vector")
	}
	bad := append([]float64(nil), p0...)
	bad[2] = math.NaN()
	if err := l.SetParams(bad); err == nil {
		t.Error("SetParams accepted NaN")
	}
	for name, f := range map[string]func() error{
		"index":    func() error { _, err := l.Step(ds, []int{0, ds.N}, 0, kernels.NoiseKey{}, 0.1, 1); return err },
		"negative": func() error { _, err := l.Step(ds, []int{-1}, 0, kernels.NoiseKey{}, 0.1, 1); return err },
		"sigma":    func() error { _, err := l.Step(ds, []int{0}, -1, kernels.NoiseKey{}, 0.1, 1); return err },
		"sigmaInf": func() error { _, err := l.Step(ds, []int{0}, math.Inf(1), kernels.NoiseKey{}, 0.1, 1); return err },
		"lr":       func() error { _, err := l.Step(ds, []int{0}, 0, kernels.NoiseKey{}, 0, 1); return err },
		"expected": func() error { _, err := l.Step(ds, []int{0}, 0, kernels.NoiseKey{}, 0.1, math.NaN()); return err },
		"dataset": func() error {
			_, err := l.Step(randomDataset(nn.LogReg([]int{5}, 3), 5, 1), []int{0}, 0, kernels.NoiseKey{}, 0.1, 1)
			return err
		},
		"nil": func() error { _, err := l.Step(nil, []int{0}, 0, kernels.NoiseKey{}, 0.1, 1); return err },
	} {
		if err := f(); err == nil {
			t.Errorf("%s: bad step accepted", name)
		}
	}
	if _, err := NewLearner(Config{Arch: arch, PhysicalBatch: 4, Clip: 1, Optimizer: OptimizerConfig{Name: "sgd", LR: 1, EMA: 0.9}}); err == nil {
		t.Error("NewLearner accepted EMA")
	}
}

// TestLearnerEvaluate: accuracy equals the fraction of test rows whose hand-computed logits
// (logistic regression) have their maximum at the label.
func TestLearnerEvaluate(t *testing.T) {
	arch := nn.LogReg([]int{5}, 4)
	ds := randomDataset(arch, 333, 12)
	cfg := learnerConfig(arch, tensor.Float64)
	cfg.EvalBatch = 50
	l, err := NewLearner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	th := mustParams(t, l)
	correct := 0
	for i := range ds.N {
		x := ds.Row(i)
		best, bestK := math.Inf(-1), -1
		for k := range 4 {
			z := th[20+k]
			for j := range 5 {
				z += float64(x[j]) * th[j*4+k]
			}
			if z > best {
				best, bestK = z, k
			}
		}
		if bestK == ds.Y[i] {
			correct++
		}
	}
	acc, err := l.Evaluate(ds)
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(correct) / float64(ds.N); acc != want {
		t.Errorf("accuracy %v, want %v", acc, want)
	}
}

// mustParams returns l's parameters, failing the test on an error.
func mustParams(t testing.TB, l *Learner) []float64 {
	t.Helper()
	p, err := l.Params(nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
