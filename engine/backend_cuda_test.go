package engine

import (
	"math"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/cuda"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// stepPair builds the same run twice, on the CPU backend and on the CUDA backend (fake
// driver), with equal initial parameters.
func stepPair(t *testing.T, arch nn.Arch, opt OptimizerConfig, train *datasets.Dataset) (cpu, gpu *run[float32]) {
	t.Helper()
	cpu, gpu = stepRun(t, arch, opt, train, DeviceCPU), stepRun(t, arch, opt, train, DeviceCUDA)
	if _, ok := cpu.be.(*cpuBackend[float32]); !ok {
		t.Fatalf("CPU run has backend %T", cpu.be)
	}
	if _, ok := gpu.be.(*cudaBackend); !ok || gpu.dev == nil {
		t.Fatalf("device run has backend %T", gpu.be)
	}
	return cpu, gpu
}

// stepRun builds stepPair's run on device, mods applied to its configuration.
func stepRun(t *testing.T, arch nn.Arch, opt OptimizerConfig, train *datasets.Dataset, device string, mods ...func(*Config)) *run[float32] {
	t.Helper()
	cfg := Config{Arch: arch, PhysicalBatch: 16, Replicas: 2, Epochs: 1, Clip: 0.5, Sigma: 0.8, Seed: 7,
		Optimizer: opt, Device: device, CUDA: fakeCUDA(t)}
	for _, m := range mods {
		m(&cfg)
	}
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

// imageProblem is deviceProblem's problem with image shape shape (C, H, W), for convolutional
// models: Synthetic's clusters in C·H·W features, read as C×H×W images.
func imageProblem(t testing.TB, shape []int) (train, test *datasets.Dataset) {
	t.Helper()
	c := datasets.DefaultSynthetic()
	c.Train, c.Test, c.Features, c.Classes = 240, 200, shape[0]*shape[1]*shape[2], 4
	train, test, err := datasets.Synthetic(c)
	if err != nil {
		t.Fatal(err)
	}
	train.Shape, test.Shape = append([]int(nil), shape...), append([]int(nil), shape...)
	return train, test
}

// TestDeviceMatchesCPUCNN is TestDeviceMatchesCPU for a small CNN (the MNIST CNN's layers on
// 1×14×14 images, tanh, momentum with a moving average), trained two epochs on the CPU and on
// the CUDA backend: the same steps, ε and counts exactly, parameters and moments to its
// float32 tolerance (the same argument: the convolutions' GEMMs sum in other orders, and their
// data movements and per-example sums are engine/nn's, bit for bit).
func TestDeviceMatchesCPUCNN(t *testing.T) {
	train, test := imageProblem(t, []int{1, 14, 14})
	c := deviceCase{"cnn-poisson-momentum-ema", func(ds *datasets.Dataset) nn.Arch { return nn.CNN(ds.Shape, ds.Classes, []int{6}, nn.Tanh) },
		OptimizerConfig{Name: "momentum", LR: 0.3, Momentum: 0.9, EMA: 0.9}, "poisson", true, ""}
	deviceMatchesCPU(t, c, train, test, 2)
}

// TestBackendsTakeTheSameStep: run.dpStep — the one DP step — on the CPU and CUDA backends,
// step by step: the same statistics (batch size, non-finite and clipped counts, correct
// predictions) exactly, the same loss, noisy gradient and parameters to float32 rounding, for
// dense and convolutional models, every optimizer, a batch over several physical batches with
// a padded last one, and a non-finite example in the batch (zeroed on both, never applied).
//
// Tolerance, 1e-5·(1 + |v|) for gradients and parameters: the two backends sum the same
// float32 products in other orders (cuBLAS GEMMs against gonum's, for the forward and backward
// passes and a convolution's per-example gradients Ĝᵢ; both clipped sums are float64, and
// the same noise is added to them: TestDeviceStepEqualsCPU). Each sum is then within
// a few float32 ulps (6e-8 relative each) of the other, times the terms' magnitudes; the
// gradients here are O(0.01) (the noise std over the expected batch) and the parameters O(1),
// so the differences stay below 1e-6·(1 + |v|). A wrong patch, pooling or col2im index, a
// missed clip or a wrong noise key moves them by 1e-3 or more.
func TestBackendsTakeTheSameStep(t *testing.T) {
	dense, _ := deviceProblem(t)
	cnnData, _ := imageProblem(t, []int{1, 14, 14})
	multiData, _ := imageProblem(t, []int{2, 7, 6})
	for _, ds := range []*datasets.Dataset{dense, cnnData, multiData} {
		ds.X[5*ds.D+3] = float32(math.Inf(1)) // example 5: non-finite gradient
	}
	// multi: two channels, a first convolution without pooling and a padded second one with
	// overlapping pooling windows, ReLU.
	multi := nn.Arch{Kind: "cnn", Input: multiData.Shape, Classes: multiData.Classes, Hidden: []int{5}, Activation: nn.ReLU,
		Conv: []nn.ConvSpec{{Filters: 3, Kernel: 3, Stride: 1, Pad: 0}, {Filters: 4, Kernel: 3, Stride: 1, Pad: 1, PoolKernel: 2, PoolStride: 1}}}
	for _, tc := range []struct {
		name  string
		arch  nn.Arch
		opt   OptimizerConfig
		train *datasets.Dataset
	}{
		{"logreg-sgd", nn.LogReg(dense.Shape, dense.Classes), OptimizerConfig{Name: OptimizerSGD, LR: 0.3}, dense},
		{"mlp-tanh-momentum", nn.MLP(dense.Shape, dense.Classes, []int{10}, nn.Tanh), OptimizerConfig{Name: OptimizerMomentum, LR: 0.2, Momentum: 0.9, WeightDecay: 1e-3}, dense},
		{"mlp-relu-adam", nn.MLP(dense.Shape, dense.Classes, []int{9, 7}, nn.ReLU), OptimizerConfig{Name: OptimizerAdam, LR: 0.01}, dense},
		{"cnn-tanh-momentum", nn.CNN(cnnData.Shape, cnnData.Classes, []int{6}, nn.Tanh), OptimizerConfig{Name: OptimizerMomentum, LR: 0.2, Momentum: 0.9, WeightDecay: 1e-3}, cnnData},
		{"cnn-multichannel-relu-adam", multi, OptimizerConfig{Name: OptimizerAdam, LR: 0.01}, multiData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			train := tc.train
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

// TestCUDABackendRefuses: the device takes float32 models, convolutional ones included, and
// a step with an index outside the dataset fails without touching the parameters.
func TestCUDABackendRefuses(t *testing.T) {
	train, _ := deviceProblem(t)
	cnn := Config{Arch: nn.CNN([]int{1, 28, 28}, train.Classes, nil, nn.ReLU), PhysicalBatch: 4, Clip: 1}
	if err := CUDASupport(&cnn); err != nil {
		t.Fatalf("CUDASupport(CNN) = %v, want nil", err)
	}
	cnn.Dtype = tensor.Float64
	if err := CUDASupport(&cnn); err == nil || !strings.Contains(err.Error(), "float64") {
		t.Fatalf("CUDASupport(float64 CNN) = %v, want a refusal naming float64", err)
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

// TestDeviceStepEqualsCPU: the parts of one DP step on the CUDA backend (fake driver) against
// the CPU backend's, for dense models and CNNs, on a batch of 13 examples in one padded
// physical batch with a non-finite example:
//
//   - per-example squared norms within 1e-5 relative (both sides take them from float32
//     activations and errors that differ by the GEMMs' summation orders; non-finite alike);
//   - the clipped sums, in float64 on both sides, within 1e-5 relative to max(|v|, 1e-2·max|v|)
//     (the same float32 terms up to those orders, summed exactly in float64 but for γ_b);
//   - the noise bit for bit: the CPU's float64 sums are put on the device, and the Gaussian
//     and the ball noise of the same key added on both sides give the same bits; and the
//     gradient rounded from them over the expected batch size is the same float32 bits.
func TestDeviceStepEqualsCPU(t *testing.T) {
	dense, _ := deviceProblem(t)
	cnnData, _ := imageProblem(t, []int{1, 14, 14})
	for _, ds := range []*datasets.Dataset{dense, cnnData} {
		ds.X[5*ds.D+3] = float32(math.Inf(1)) // example 5: non-finite gradient
	}
	for _, tc := range []struct {
		name  string
		arch  nn.Arch
		train *datasets.Dataset
		floor float64
	}{
		{"logreg", nn.LogReg(dense.Shape, dense.Classes), dense, 1e-2},
		{"mlp-relu", nn.MLP(dense.Shape, dense.Classes, []int{9, 7}, nn.ReLU), dense, 1e-2},
		// The CPU's float32 tanh (engine/nn's tanh32) and the device's (dpsgd.cu's
		// activate_f32) are two functions each within about an ulp of the exact value, so
		// the convolutions' sums differ by roundings that cancellation amplifies in their
		// smallest entries: those are compared at the scale of the stack tests.
		{"cnn-tanh", nn.CNN(cnnData.Shape, cnnData.Classes, []int{6}, nn.Tanh), cnnData, 1e-1},
	} {
		stepEqualsCPU(t, tc.name, tc.arch, tc.train, tc.floor, 1)
	}
}

// stepEqualsCPU runs TestDeviceStepEqualsCPU's checks for arch on train (example 5 made
// non-finite by the caller, nonFinite of the batch's examples then have a non-finite gradient)
// as subtest name, the clipped sums within 1e-5 relative to max(|v|, floor·max|v|).
func stepEqualsCPU(t *testing.T, name string, arch nn.Arch, train *datasets.Dataset, floor float64, nonFinite int) {
	if !graphsOnGonum() {
		// The fake device's products round as gonum's do; with another BLAS under the CPU's
		// graphs (DPSGD_BLAS), the float32 forward passes differ by roundings that the sums'
		// cancellations amplify in their smallest entries, so those are compared at the
		// scale of the stack tests.
		floor = max(floor, 1e-1)
	}
	t.Run(name, func(t *testing.T) {
		cpu, gpu := stepPair(t, arch, OptimizerConfig{Name: OptimizerSGD, LR: 0.1}, train)
		cb, gb := cpu.be.(*cpuBackend[float32]), gpu.be.(*cudaBackend)
		// The non-GEMM parameters (a normalization's γ and β) moved off their initial ones
		// and zeros on both sides, so that a step that forgets one of them differs.
		shapes, err := arch.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for k := range cpu.params.List[2*len(shapes):] {
			for _, r := range []*run[float32]{cpu, gpu} {
				v := r.params.List[2*len(shapes)+k].Value.Data().([]float32)
				for j := range v {
					v[j] = float32(0.6 + 0.15*float64((j+k)%5))
				}
			}
		}
		if err := gb.push(); err != nil {
			t.Fatal(err)
		}
		idx := make([]int, 13)
		for i := range idx {
			idx[i] = (5 + 17*i) % train.N
		}
		clip := kernels.ClipBound[float32](cpu.cfg.Clip)
		sc, err := cb.clippedSum(train, idx, clip)
		if err != nil {
			t.Fatal(err)
		}
		sg, err := gb.clippedSum(train, idx, clip)
		if err != nil {
			t.Fatal(err)
		}
		if sc.NonFinite != nonFinite || sg.NonFinite != nonFinite || sc.Clipped != sg.Clipped || sc.Clipped < 2 {
			t.Fatalf("stats: CPU %+v, device %+v (want %d non-finite examples and some clipped)", sc, sg, nonFinite)
		}
		for i, w := range cb.reps[0].norm2[:len(idx)] {
			g := gb.hNorm[i]
			if math.IsInf(w, 0) || math.IsNaN(w) {
				if !math.IsInf(g, 0) && !math.IsNaN(g) {
					t.Fatalf("norm² %d: device %v, CPU %v", i, g, w)
				}
				continue
			}
			if math.Abs(g-w) > 1e-5*w {
				t.Fatalf("norm² %d: device %v, CPU %v", i, g, w)
			}
		}
		bufs, lens := gb.sums()
		for p, want := range cb.sums {
			got := make([]float64, lens[p])
			if err := cuda.Download(gb.d, got, bufs[p]); err != nil {
				t.Fatal(err)
			}
			scale := 0.0
			for _, w := range want {
				scale = max(scale, math.Abs(w))
			}
			for j, w := range want {
				if math.Abs(got[j]-w) > 1e-5*max(math.Abs(w), floor*scale) {
					t.Fatalf("clipped sum %d[%d]: device %v, CPU %v", p, j, got[j], w)
				}
			}
			// The same float64 sums on both sides for the noise.
			if err := cuda.Upload(gb.d, bufs[p], want); err != nil {
				t.Fatal(err)
			}
		}
		key := kernels.NoiseKey{Seed: 31, Step: 4}
		if err := firstErr(cb.addGaussian(0.7, key), gb.addGaussian(0.7, key), cb.addBall(0.3, key), gb.addBall(0.3, key)); err != nil {
			t.Fatal(err)
		}
		for p, want := range cb.sums {
			got := make([]float64, lens[p])
			if err := cuda.Download(gb.d, got, bufs[p]); err != nil {
				t.Fatal(err)
			}
			for j, w := range want {
				if math.Float64bits(got[j]) != math.Float64bits(w) {
					t.Fatalf("noisy sum %d[%d]: device %v, CPU %v (want the same bits)", p, j, got[j], w)
				}
			}
		}
		u := cpu.opt.kind.update(&cpu.opt.cfg, 1, 0.1)
		if err := firstErr(cb.apply(20, u), gb.apply(20, u)); err != nil {
			t.Fatal(err)
		}
		g, err := gb.gradients()
		if err != nil {
			t.Fatal(err)
		}
		for p, want := range cb.grads {
			for j, w := range want {
				if math.Float32bits(g[p][j]) != math.Float32bits(w) {
					t.Fatalf("gradient %d[%d]: device %v, CPU %v (want the same bits)", p, j, g[p][j], w)
				}
			}
		}
	})
}

// TestDeviceBF16 runs the step with --precision bf16 (bf16 GEMMs with float32 accumulation
// in the forward and backward passes; the fake driver rounds the operands as a GPU does) for
// a dense model and a CNN:
//
//   - the clip bound holds exactly: with a batch of one example, the clipped sum is that
//     example's clipped gradient, and its float64 norm is at most C (not C within a tolerance)
//     for every example, most of them clipped: the norm is taken from the very per-example
//     gradient that is summed, whatever precision produced the activations and errors;
//   - bf16 is really used (the sums differ from the fp32 run's) and stays close to it: the
//     loss within 2% and each clipped sum within 20% in norm. bf16 keeps 8 significant bits
//     (each GEMM entry within 0.8% of Σ|aᵢbᵢ|, TestGemmBF16ErrorBound), compounded over the
//     layers and the clip coefficients; a max pooling's argmax can also move with a rounded
//     pre-activation, sending a window's gradient to another position. Measured (-v): the
//     MLP's sums within 0.7%, the CNN's first convolution's within 10%, the rest within 2.2%.
//     A wrong operand or transpose moves them by 100% or more;
//   - the noise is the fp32 run's, bit for bit, on the same sums (the same float64 kernel).
func TestDeviceBF16(t *testing.T) {
	dense, _ := deviceProblem(t)
	cnnData, _ := imageProblem(t, []int{1, 14, 14})
	bf16 := func(c *Config) { c.Precision = PrecisionBF16 }
	for _, tc := range []struct {
		name  string
		arch  nn.Arch
		train *datasets.Dataset
	}{
		{"mlp-relu", nn.MLP(dense.Shape, dense.Classes, []int{9, 7}, nn.ReLU), dense},
		{"cnn-tanh", nn.CNN(cnnData.Shape, cnnData.Classes, []int{6}, nn.Tanh), cnnData},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := OptimizerConfig{Name: OptimizerSGD, LR: 0.1}
			half := stepRun(t, tc.arch, opt, tc.train, DeviceCUDA, bf16, func(c *Config) { c.Clip = 0.05 })
			full := stepRun(t, tc.arch, opt, tc.train, DeviceCUDA, func(c *Config) { c.Clip = 0.05 })
			hb, fb := half.be.(*cudaBackend), full.be.(*cudaBackend)
			if !hb.bf16 || fb.bf16 {
				t.Fatalf("bf16 flags %v, %v", hb.bf16, fb.bf16)
			}
			clip := kernels.ClipBound[float32](half.cfg.Clip)
			clipped := 0
			for i := range 12 {
				st, err := hb.clippedSum(tc.train, []int{i}, clip)
				if err != nil {
					t.Fatal(err)
				}
				clipped += st.Clipped
				bufs, lens := hb.sums()
				sq := 0.0
				for p, buf := range bufs {
					v := make([]float64, lens[p])
					if err := cuda.Download(hb.d, v, buf); err != nil {
						t.Fatal(err)
					}
					for _, x := range v {
						sq += x * x
					}
				}
				if n := math.Sqrt(sq); !(n <= half.cfg.Clip) {
					t.Fatalf("example %d: clipped gradient norm %v above C = %v", i, n, half.cfg.Clip)
				}
			}
			if clipped < 10 {
				t.Fatalf("%d of 12 examples clipped: the bound is not exercised", clipped)
			}
			idx := make([]int, 30)
			for i := range idx {
				idx[i] = (3 + 7*i) % tc.train.N
			}
			sh, err := hb.clippedSum(tc.train, idx, clip)
			if err != nil {
				t.Fatal(err)
			}
			sf, err := fb.clippedSum(tc.train, idx, clip)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(sh.Loss-sf.Loss) > 0.02*math.Abs(sf.Loss) || sh.BatchSize != sf.BatchSize {
				t.Fatalf("bf16 %+v, fp32 %+v", sh, sf)
			}
			hbufs, lens := hb.sums()
			fbufs, _ := fb.sums()
			differ := 0
			for p := range hbufs {
				h, f := make([]float64, lens[p]), make([]float64, lens[p])
				if err := firstErr(cuda.Download(hb.d, h, hbufs[p]), cuda.Download(fb.d, f, fbufs[p])); err != nil {
					t.Fatal(err)
				}
				var dd, ff float64
				for j := range f {
					dd += (h[j] - f[j]) * (h[j] - f[j])
					ff += f[j] * f[j]
					if h[j] != f[j] {
						differ++
					}
				}
				if rel := math.Sqrt(dd / ff); !(rel <= 0.2) {
					t.Fatalf("sum %d: ‖bf16 − fp32‖ = %.3g·‖fp32‖, want ≤ 0.2", p, rel)
				} else {
					t.Logf("sum %d: ‖bf16 − fp32‖ = %.3g·‖fp32‖", p, rel)
				}
				if err := cuda.Upload(hb.d, hbufs[p], f); err != nil { // the same sums for the noise
					t.Fatal(err)
				}
			}
			if differ == 0 {
				t.Fatal("the bf16 run's sums equal the fp32 run's bit for bit: bf16 not used")
			}
			key := kernels.NoiseKey{Seed: 5, Step: 2}
			if err := firstErr(hb.addGaussian(0.3, key), fb.addGaussian(0.3, key)); err != nil {
				t.Fatal(err)
			}
			for p := range hbufs {
				h, f := make([]float64, lens[p]), make([]float64, lens[p])
				if err := firstErr(cuda.Download(hb.d, h, hbufs[p]), cuda.Download(fb.d, f, fbufs[p])); err != nil {
					t.Fatal(err)
				}
				for j := range f {
					if math.Float64bits(h[j]) != math.Float64bits(f[j]) {
						t.Fatalf("noisy sum %d[%d]: bf16 run %v, fp32 run %v", p, j, h[j], f[j])
					}
				}
			}
		})
	}
	// bf16 is the device's: refused on the CPU, with float64, and an unknown precision.
	for _, c := range []Config{{Device: DeviceCPU, Precision: PrecisionBF16}, {Device: DeviceCUDA, Precision: PrecisionBF16, Dtype: tensor.Float64},
		{Device: DeviceCUDA, Precision: "fp8"}} {
		if err := c.validateDevice(); err == nil || !strings.Contains(err.Error(), "precision") {
			t.Fatalf("%+v: err %v, want a refusal naming the precision", c, err)
		}
	}
}

// TestDeviceAdversarialAccumulationRounding is TestAdversarialAccumulationRounding on the CUDA
// backend (fake driver): records of a logistic regression on one feature with nearly the same
// gradient, all clipped, a logical batch of 4·128 over four physical batches, with and without
// one record. The device sums in float64 (the dense layers' widened DGEMM) and adds the noise
// there, rounding only after, so the two noisy sums differ by at most C·(1 + 1e-6); a float32
// sum of 512 aligned terms moves them by up to about 1 + 512·2⁻²⁴ ≈ 1 + 3·10⁻⁵. (Small, and
// skipped by -short: the fake driver runs every GPU thread on the CPU.)
func TestDeviceAdversarialAccumulationRounding(t *testing.T) {
	if testing.Short() {
		t.Skip("slow on the fake driver")
	}
	const phys, n, clip, sigma = 128, 4 * 128, 0.05, 1.0
	ds := &datasets.Dataset{Name: "aligned", X: make([]float32, n), Y: make([]int, n), N: n, D: 1, Classes: 2, Shape: []int{1}}
	for i := range ds.X {
		ds.X[i] = 1 + float32(i%97)/97
	}
	r := stepRun(t, nn.LogReg([]int{1}, 2), OptimizerConfig{Name: OptimizerSGD, LR: 0.1}, ds, DeviceCUDA,
		func(c *Config) { c.PhysicalBatch, c.Clip = phys, clip })
	gb := r.be.(*cudaBackend)
	noisy := func(idx []int) [][]float64 {
		st, err := gb.clippedSum(ds, idx, kernels.ClipBound[float32](clip))
		if err != nil {
			t.Fatal(err)
		}
		if st.Clipped != len(idx) {
			t.Fatalf("%d of %d clipped: the test wants every record clipped", st.Clipped, len(idx))
		}
		if err := gb.addGaussian(sigma*clip, kernels.NoiseKey{Seed: 11, Step: 3}); err != nil {
			t.Fatal(err)
		}
		bufs, lens := gb.sums()
		out := make([][]float64, len(bufs))
		for p, buf := range bufs {
			out[p] = make([]float64, lens[p])
			if err := cuda.Download(gb.d, out[p], buf); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	worst := 0.0
	for _, rec := range []int{phys - 1, n - 1} {
		without := append(append([]int(nil), all[:rec]...), all[rec+1:]...)
		a, b := noisy(all), noisy(without)
		s := 0.0
		for p := range a {
			for j := range a[p] {
				s += (a[p][j] - b[p][j]) * (a[p][j] - b[p][j])
			}
		}
		d := math.Sqrt(s) / clip
		worst = max(worst, d)
		if !(d <= 1+1e-6) {
			t.Errorf("record %d: the noisy sums differ by %.9g·C, want ≤ C·(1 + 1e-6)", rec, d)
		}
	}
	t.Logf("largest ‖Δ‖/C on the device: %.9g", worst)
}
