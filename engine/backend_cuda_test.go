package engine

import (
	"math"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
)

// stepPair builds the same run twice, on the CPU backend and on the CUDA backend (fake
// driver), with equal initial parameters.
func stepPair(t *testing.T, arch nn.Arch, opt OptimizerConfig, train *datasets.Dataset) (cpu, gpu *run[float32]) {
	t.Helper()
	mk := func(device string) *run[float32] {
		cfg := Config{Arch: arch, PhysicalBatch: 16, Replicas: 2, Epochs: 1, Clip: 0.5, Sigma: 0.8, Seed: 7,
			Optimizer: opt, Device: device, CUDA: fakeCUDA(t)}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		r, err := newRunParams[float32](cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.close)
		if err := r.build(train); err != nil {
			t.Fatal(err)
		}
		return r
	}
	cpu, gpu = mk(DeviceCPU), mk(DeviceCUDA)
	if _, ok := cpu.be.(*cpuBackend[float32]); !ok {
		t.Fatalf("CPU run has backend %T", cpu.be)
	}
	if _, ok := gpu.be.(*cudaBackend); !ok || gpu.dev == nil {
		t.Fatalf("device run has backend %T", gpu.be)
	}
	return cpu, gpu
}

// TestBackendsTakeTheSameStep: run.dpStep — the one DP step — on the CPU and CUDA backends,
// step by step: the same statistics (batch size, non-finite and clipped counts, correct
// predictions) exactly, the same loss, noisy gradient and parameters to float32 rounding, for
// dense models, every optimizer, a batch over several physical batches with a padded last
// one, and a non-finite example in the batch (zeroed on both, never applied).
func TestBackendsTakeTheSameStep(t *testing.T) {
	train, _ := deviceProblem(t)
	train.X[5*train.D+3] = float32(math.Inf(1)) // example 5: non-finite gradient
	for _, tc := range []struct {
		name string
		arch nn.Arch
		opt  OptimizerConfig
	}{
		{"logreg-sgd", nn.LogReg(train.Shape, train.Classes), OptimizerConfig{Name: OptimizerSGD, LR: 0.3}},
		{"mlp-tanh-momentum", nn.MLP(train.Shape, train.Classes, []int{10}, nn.Tanh), OptimizerConfig{Name: OptimizerMomentum, LR: 0.2, Momentum: 0.9, WeightDecay: 1e-3}},
		{"mlp-relu-adam", nn.MLP(train.Shape, train.Classes, []int{9, 7}, nn.ReLU), OptimizerConfig{Name: OptimizerAdam, LR: 0.01}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cpu, gpu := stepPair(t, tc.arch, tc.opt, train)
			for step := range 2 {
				idx := make([]int, 21) // 2 physical batches of 16, the last padded
				for i := range idx {
					idx[i] = (5 + 11*i + 7*step) % train.N
				}
				noise := stepNoise{kind: noiseGaussian, std: 0.8 * 0.5, key: kernels.NoiseKey{Seed: 99, Step: uint64(step)}}
				sc, err := cpu.dpStep(train, idx, noise, 0.3, 40)
				if err != nil {
					t.Fatal(err)
				}
				sg, err := gpu.dpStep(train, idx, noise, 0.3, 40)
				if err != nil {
					t.Fatal(err)
				}
				if sc.BatchSize != sg.BatchSize || sc.NonFinite != sg.NonFinite || sc.Clipped != sg.Clipped || sc.Correct != sg.Correct ||
					math.Abs(sc.Loss-sg.Loss) > 1e-5*(1+math.Abs(sc.Loss)) {
					t.Fatalf("step %d: CPU %+v, device %+v", step, sc, sg)
				}
				if step == 0 && sc.NonFinite != 1 {
					t.Fatalf("step 0: %d non-finite examples, want 1 (example 5)", sc.NonFinite)
				}
				g, err := gpu.be.(*cudaBackend).gradients()
				if err != nil {
					t.Fatal(err)
				}
				for p, want := range cpu.be.(*cpuBackend[float32]).grads {
					for j, w := range want {
						if d := math.Abs(float64(g[p][j] - w)); d > 1e-5*(1+math.Abs(float64(w))) {
							t.Fatalf("step %d: gradient %d[%d]: device %v, CPU %v", step, p, j, g[p][j], w)
						}
					}
				}
				if err := gpu.be.pull(true); err != nil {
					t.Fatal(err)
				}
				for p, want := range paramSlices[float32](cpu.params) {
					got := paramSlices[float32](gpu.params)[p]
					for j, w := range want {
						if d := math.Abs(float64(got[j] - w)); d > 1e-5*(1+math.Abs(float64(w))) {
							t.Fatalf("step %d: parameter %d[%d]: device %v, CPU %v", step, p, j, got[j], w)
						}
					}
				}
				if cpu.opt.t != step+1 || gpu.opt.t != step+1 {
					t.Fatalf("step %d: optimizer steps CPU %d, device %d", step, cpu.opt.t, gpu.opt.t)
				}
			}
		})
	}
}

// TestCUDABackendRefuses: the device takes dense float32 models only, and a step with an
// index outside the dataset fails without touching the parameters.
func TestCUDABackendRefuses(t *testing.T) {
	train, _ := deviceProblem(t)
	cnn := Config{Arch: nn.CNN([]int{1, 3, 4}, train.Classes, nil, nn.ReLU), PhysicalBatch: 4, Clip: 1}
	if err := CUDASupport(&cnn); err == nil || !strings.Contains(err.Error(), "convolutional") {
		t.Fatalf("CUDASupport(CNN) = %v, want a refusal naming convolutional models", err)
	}
	_, gpu := stepPair(t, nn.LogReg(train.Shape, train.Classes), OptimizerConfig{Name: OptimizerSGD, LR: 0.1}, train)
	before := append([]float32(nil), paramSlices[float32](gpu.params)[0]...)
	if _, err := gpu.dpStep(train, []int{0, train.N}, stepNoise{}, 0.1, 2); err == nil || !strings.Contains(err.Error(), "index") {
		t.Fatalf("index %d: err = %v, want an index error", train.N, err)
	}
	if err := gpu.be.pull(false); err != nil {
		t.Fatal(err)
	}
	for j, w := range paramSlices[float32](gpu.params)[0] {
		if w != before[j] {
			t.Fatalf("parameter 0[%d] changed by a refused step: %v → %v", j, before[j], w)
		}
	}
	if gpu.opt.t != 0 {
		t.Fatalf("a refused step counted: optimizer at step %d", gpu.opt.t)
	}
}
