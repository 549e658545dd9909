package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dpsgd/dpsgd/cuda"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/checkpoint"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/engine/sampler"
	kcuda "github.com/dpsgd/dpsgd/kernels/cuda"
	"gorgonia.org/tensor"
)

// The fake CUDA driver (cuda/testdata/fake, which runs the real dpsgd.cu kernels on the CPU)
// is built once per test binary into deviceFakeDir, removed by TestMain: a process must not
// load two fake drivers.
var (
	deviceFakeOnce sync.Once
	deviceFakeDir  string
	deviceFakeErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if deviceFakeDir != "" {
		os.RemoveAll(deviceFakeDir)
	}
	os.Exit(code)
}

// fakeCUDA returns the options opening the fake device, skipping the test without gcc.
func fakeCUDA(t testing.TB) cuda.Options {
	t.Helper()
	deviceFakeOnce.Do(func() {
		if deviceFakeDir, deviceFakeErr = os.MkdirTemp("", "engine-fakecuda"); deviceFakeErr == nil {
			_, _, deviceFakeErr = cuda.BuildFakeDriver(deviceFakeDir, kcuda.Source())
		}
	})
	if deviceFakeErr != nil {
		t.Skip("fake CUDA driver unavailable: " + deviceFakeErr.Error())
	}
	return cuda.Options{LibCUDA: filepath.Join(deviceFakeDir, "libcuda.so.1"), LibCUBLAS: filepath.Join(deviceFakeDir, "libcublas.so.13")}
}

// deviceProblem is small: the fake driver runs each GPU thread of a kernel as a fiber, a few
// milliseconds per example.
func deviceProblem(t testing.TB) (train, test *datasets.Dataset) {
	t.Helper()
	c := datasets.DefaultSynthetic()
	c.Train, c.Test, c.Features, c.Classes = 240, 200, 12, 4
	train, test, err := datasets.Synthetic(c)
	if err != nil {
		t.Fatal(err)
	}
	return train, test
}

// deviceCase is one configuration of the device tests; build makes a fresh run of it.
type deviceCase struct {
	name    string
	arch    func(ds *datasets.Dataset) nn.Arch
	opt     OptimizerConfig
	smp     string // "poisson" or "shuffle"
	private bool
	noise   string
}

func (c deviceCase) build(t testing.TB, train *datasets.Dataset, epochs int, device string) (Config, sampler.Sampler, Privacy) {
	t.Helper()
	cfg := Config{Arch: c.arch(train), PhysicalBatch: 24, Replicas: 2, Epochs: epochs, Clip: 1, Sigma: 0.8, Seed: 11,
		NonPrivate: !c.private, Noise: c.noise, Optimizer: c.opt, Device: device, CUDA: fakeCUDA(t)}
	if c.noise == NoiseBall {
		cfg.Radius = 2
	}
	// (The ball case uses the Gaussian accountant: the engine only reports its ε, and the
	// comparison is between devices.)
	smp, pv := testSamplerPrivacy(t, c.smp, train.N, 40, cfg, c.private, 100)
	return cfg, smp, pv
}

func mlpArch(ds *datasets.Dataset) nn.Arch { return nn.MLP(ds.Shape, ds.Classes, []int{10}, nn.Tanh) }
func reluArch(ds *datasets.Dataset) nn.Arch {
	return nn.MLP(ds.Shape, ds.Classes, []int{9, 7}, nn.ReLU)
}
func logregArch(ds *datasets.Dataset) nn.Arch { return nn.LogReg(ds.Shape, ds.Classes) }

var deviceCases = []deviceCase{
	{"mlp-poisson-momentum-ema-cosine", mlpArch, OptimizerConfig{Name: "momentum", LR: 0.5, Momentum: 0.9, Schedule: "cosine", EMA: 0.9}, "poisson", true, ""},
	{"relu2-shuffle-adam-decay", reluArch, OptimizerConfig{Name: "adam", LR: 0.01, WeightDecay: 1e-3}, "shuffle", true, ""},
	{"logreg-poisson-sgd-nonprivate", logregArch, OptimizerConfig{Name: "sgd", LR: 0.3}, "poisson", false, ""},
	{"logreg-poisson-sgd-ball", logregArch, OptimizerConfig{Name: "sgd", LR: 0.3}, "poisson", true, NoiseBall},
}

// finalParams trains and returns the result and the final parameters (by a resume-free
// checkpoint at the end, which holds them exactly).
func finalParams(t *testing.T, cfg Config, train, test *datasets.Dataset, smp sampler.Sampler, pv Privacy) (*Result, *checkpoint.Checkpoint) {
	t.Helper()
	cfg.Checkpoint = CheckpointOptions{Path: filepath.Join(t.TempDir(), "final.ckpt"), SamplerSeed: cfg.Seed}
	res, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
	if err != nil {
		t.Fatalf("device %s: %v", cfg.Device, err)
	}
	ck, err := checkpoint.Load(cfg.Checkpoint.Path)
	if err != nil {
		t.Fatal(err)
	}
	return res, ck
}

// TestDeviceMatchesCPU: the same configuration trained on the CUDA trainer (fake driver) and
// on the CPU gives the same steps, examples, ε, ledger and non-finite counts exactly, and
// parameters, optimizer state, losses and accuracies equal to float32 rounding.
//
// Tolerance: the two backends sum the same float32 products in different orders (cuBLAS
// GEMM against the CPU kernels) and round the same noise draws to float32 once each, so one
// step's update differs by a few float32 ulps of the parameter (6e-8 relative each); over the
// 12 steps here (learning rates ≤ 0.5, no amplifying dynamics at this size) that stays below
// 1e-6·(1 + |w|), and the test allows 2e-6·(1 + |w|). The measured difference is 2–5e-8
// (printed with -v). A wrong noise key or tensor order, a missed clip, a wrong optimizer
// constant or a lost weight decay differ by 1e-3 or more.
func TestDeviceMatchesCPU(t *testing.T) {
	train, test := deviceProblem(t)
	cases := deviceCases
	if testing.Short() {
		cases = cases[:2]
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { deviceMatchesCPU(t, c, train, test, 2) })
	}
}

// deviceMatchesCPU trains c for the given epochs on the CPU and on the CUDA backend (fake
// driver) and checks TestDeviceMatchesCPU's equalities and tolerances.
func deviceMatchesCPU(t *testing.T, c deviceCase, train, test *datasets.Dataset, epochs int) {
	t.Helper()
	cfg, smp, pv := c.build(t, train, epochs, DeviceCPU)
	cpuRes, cpuCk := finalParams(t, cfg, train, test, smp, pv)
	cfg, smp, pvDev := c.build(t, train, epochs, DeviceCUDA)
	devRes, devCk := finalParams(t, cfg, train, test, smp, pvDev)
	if cpuRes.Device != DeviceCPU || devRes.Device != DeviceCUDA || !strings.Contains(devRes.DeviceName, "FakeGPU") {
		t.Fatalf("devices %q and %q (%q)", cpuRes.Device, devRes.Device, devRes.DeviceName)
	}
	if devRes.Steps != cpuRes.Steps || devRes.EpochsRun != cpuRes.EpochsRun || devRes.NonFinite != cpuRes.NonFinite ||
		!(devRes.Epsilon == cpuRes.Epsilon || math.IsNaN(devRes.Epsilon) && math.IsNaN(cpuRes.Epsilon)) {
		t.Fatalf("device: steps %d, epochs %d, non-finite %d, ε %v; CPU: %d, %d, %d, %v", devRes.Steps, devRes.EpochsRun,
			devRes.NonFinite, devRes.Epsilon, cpuRes.Steps, cpuRes.EpochsRun, cpuRes.NonFinite, cpuRes.Epsilon)
	}
	if pv.Ledger != nil && (pv.Ledger.Steps != pvDev.Ledger.Steps || len(pv.Ledger.Epochs) != len(pvDev.Ledger.Epochs)) {
		t.Fatalf("ledgers differ: %+v, %+v", pv.Ledger, pvDev.Ledger)
	}
	for i, e := range cpuRes.History {
		d := devRes.History[i]
		n := float64(e.ExamplesSeen)
		if d.Steps != e.Steps || d.ExamplesSeen != e.ExamplesSeen || d.NonFinite != e.NonFinite ||
			!(d.Epsilon == e.Epsilon || math.IsNaN(d.Epsilon) && math.IsNaN(e.Epsilon)) ||
			math.Abs(d.TrainLoss-e.TrainLoss) > 1e-4*(1+math.Abs(e.TrainLoss)) ||
			math.Abs(d.TrainAcc-e.TrainAcc) > 2/n || math.Abs(d.ClippedFrac-e.ClippedFrac) > 2/n ||
			math.Abs(d.TestAcc-e.TestAcc) > 2/float64(test.N) {
			t.Errorf("epoch %d: device %+v\n           CPU    %+v", i+1, d, e)
		}
	}
	worst := closeTensors(t, "parameters", devCk.Params, cpuCk.Params, 2e-6)
	closeTensors(t, "moment1", devCk.Moment1, cpuCk.Moment1, 2e-6)
	closeTensors(t, "moment2", devCk.Moment2, cpuCk.Moment2, 2e-6)
	closeTensors(t, "ema", devCk.EMA, cpuCk.EMA, 2e-6)
	if devCk.State.OptimizerSteps != cpuCk.State.OptimizerSteps {
		t.Errorf("optimizer steps %d, CPU %d", devCk.State.OptimizerSteps, cpuCk.State.OptimizerSteps)
	}
	// Equal bits are possible and fine: for logistic regression both paths compute the
	// softmax cross-entropy row by row in float64, and the device name above already
	// proves the steps ran on the (fake) device.
	t.Logf("largest parameter difference %.3g (relative to 1 + |w|)", worst)
}

// closeTensors checks |a − b| ≤ tol·(1 + |b|) elementwise and returns the largest
// |a − b| / (1 + |b|).
func closeTensors(t *testing.T, name string, a, b [][]float64, tol float64) float64 {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d tensors, want %d", name, len(a), len(b))
	}
	worst := 0.0
	for i := range a {
		if len(a[i]) != len(b[i]) {
			t.Fatalf("%s %d: %d values, want %d", name, i, len(a[i]), len(b[i]))
		}
		for j, v := range a[i] {
			d := math.Abs(v-b[i][j]) / (1 + math.Abs(b[i][j]))
			if !(d <= tol) {
				t.Errorf("%s tensor %d[%d]: device %v, CPU %v", name, i, j, v, b[i][j])
				return d
			}
			worst = max(worst, d)
		}
	}
	return worst
}

// TestDeviceResumeBitwise: on the device, a run interrupted mid-epoch (and one interrupted at
// an epoch boundary) and resumed from its checkpoint on the device ends with the same
// parameters bit for bit as the uninterrupted device run (the fake driver is deterministic),
// with the same history and ledger; the checkpoints carry the device's optimizer state.
func TestDeviceResumeBitwise(t *testing.T) {
	train, test := deviceProblem(t)
	cases := deviceCases[:2]
	if testing.Short() {
		cases = cases[:1]
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, smp, pv := c.build(t, train, 2, DeviceCUDA)
			ref, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
			if err != nil {
				t.Fatal(err)
			}
			m := smp.StepsPerEpoch()
			stops := []int{m/2 + 1, m}
			if c.opt.Name == "adam" {
				stops = stops[:1] // the epoch boundary is the first case's; keep the package fast
			}
			for _, stop := range stops {
				path := filepath.Join(t.TempDir(), "run.ckpt")
				cfg, smp, pv := c.build(t, train, 2, DeviceCUDA)
				cfg.Checkpoint = CheckpointOptions{Path: path, Every: 3, SamplerSeed: cfg.Seed}
				ctx, cancel := context.WithCancel(context.Background())
				first, err := Train(ctx, cfg, train, test, smp, pv, &cancelAt{n: stop, cancel: cancel})
				cancel()
				if !errors.Is(err, ErrInterrupted) || first.Steps != stop || first.Device != DeviceCUDA {
					t.Fatalf("stop %d: err %v, steps %d, device %s", stop, err, first.Steps, first.Device)
				}
				ck, err := checkpoint.Load(path)
				if err != nil {
					t.Fatal(err)
				}
				if ck.State.OptimizerSteps != stop || (c.opt.Name != "sgd" && !nonZero(ck.Moment1)) || (c.opt.Name == "adam" && !nonZero(ck.Moment2)) {
					t.Fatalf("stop %d: checkpoint optimizer state: steps %d, moments %v %v", stop, ck.State.OptimizerSteps, nonZero(ck.Moment1), nonZero(ck.Moment2))
				}
				cfg, smp, pv = c.build(t, train, 2, DeviceCUDA)
				cfg.Checkpoint = CheckpointOptions{Path: path, Resume: ck, SamplerSeed: cfg.Seed}
				got, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
				if err != nil {
					t.Fatalf("stop %d: resume: %v", stop, err)
				}
				if got.ParamsDigest != ref.ParamsDigest || got.Steps != ref.Steps || got.Epsilon != ref.Epsilon || !sameEpochs(got.History, ref.History) {
					t.Errorf("stop %d: resumed digest %.12s steps %d ε %v, uninterrupted %.12s %d %v\n got %+v\nwant %+v", stop, got.ParamsDigest,
						got.Steps, got.Epsilon, ref.ParamsDigest, ref.Steps, ref.Epsilon, stripSeconds(got.History), stripSeconds(ref.History))
				}
				if pv.Ledger.Steps != ref.Steps {
					t.Errorf("stop %d: ledger at %d steps, want %d", stop, pv.Ledger.Steps, ref.Steps)
				}
			}
		})
	}
}

func nonZero(ts [][]float64) bool {
	for _, x := range ts {
		for _, v := range x {
			if v != 0 {
				return true
			}
		}
	}
	return false
}

// TestDeviceAutoFallback: DeviceAuto without a driver, or with a configuration the device
// does not run (float64, secure noise), says why exactly once and gives the CPU
// run's parameters bit for bit; DeviceCUDA in those cases fails before any step with an error
// wrapping ErrDeviceUnavailable that names the reason.
func TestDeviceAutoFallback(t *testing.T) {
	train, test := deviceProblem(t)
	c := deviceCases[0]
	noDriver := cuda.Options{LibCUDA: "/nonexistent/libcuda.so.1"}
	cfg, smp, pv := c.build(t, train, 1, DeviceCPU)
	cpu, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, why string
		mut       func(*Config)
	}{
		{"no driver", "nonexistent", func(c *Config) { c.CUDA = noDriver }},
		{"float64", "float64", func(c *Config) { c.Dtype = tensor.Float64 }},
		{"secure", "secure", func(c *Config) { c.Secure = true }},
	} {
		var whys []string
		cfg, smp, pv := c.build(t, train, 1, DeviceAuto)
		tc.mut(&cfg)
		if cfg.Secure && pv.Ledger != nil {
			pv = securePrivacy(t, cfg, pv)
		}
		cfg.OnDeviceFallback = func(why string) { whys = append(whys, why) }
		res, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(whys) != 1 || !strings.Contains(whys[0], tc.why) || res.Device != DeviceCPU {
			t.Fatalf("%s: fallback reasons %q, device %s; want one naming %q", tc.name, whys, res.Device, tc.why)
		}
		if tc.name == "no driver" && res.ParamsDigest != cpu.ParamsDigest {
			t.Fatalf("auto without a driver: digest %.12s, the CPU run's %.12s", res.ParamsDigest, cpu.ParamsDigest)
		}
		cfg, smp, pv = c.build(t, train, 1, DeviceCUDA)
		tc.mut(&cfg)
		if cfg.Secure && pv.Ledger != nil {
			pv = securePrivacy(t, cfg, pv)
		}
		res, err = Train(context.Background(), cfg, train, test, smp, pv, nil)
		if !errors.Is(err, ErrDeviceUnavailable) || !strings.Contains(err.Error(), tc.why) || res != nil {
			t.Fatalf("%s forced: err %v, result %v; want ErrDeviceUnavailable naming %q and no result", tc.name, err, res, tc.why)
		}
	}
	cnn := Config{Arch: nn.CNN([]int{1, 28, 28}, 3, []int{4}, nn.ReLU)}
	if err := CUDASupport(&cnn); err != nil {
		t.Fatalf("CUDASupport(cnn float32) = %v", err)
	}
	if err := CUDASupport(&cfg); err != nil {
		t.Fatalf("CUDASupport(mlp float32) = %v", err)
	}
	bad := cfg
	bad.Device = "tpu"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "tpu") {
		t.Fatalf("device tpu: %v", err)
	}
	// The zero value is the CPU.
	zero, smp, pv := c.build(t, train, 1, "")
	res, err := Train(context.Background(), zero, train, test, smp, pv, nil)
	if err != nil || res.Device != DeviceCPU || res.ParamsDigest != cpu.ParamsDigest {
		t.Fatalf("zero device: %v, %s", err, fmt.Sprint(res.Device))
	}
}

func BenchmarkFakeDeviceTrainEpoch(b *testing.B) {
	train, test := deviceProblem(b)
	c := deviceCases[0]
	for b.Loop() {
		cfg, smp, pv := c.build(b, train, 1, DeviceCUDA)
		if _, err := Train(context.Background(), cfg, train, test, smp, pv, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDeviceDivergenceGuard: a learning rate that overflows float32 makes the parameters
// non-finite after the first update; on the device, as on the CPU, the run stops at step 1
// with ErrDiverged naming the parameters (the device checks them with ParamsFinite), and
// writes no checkpoint after the initial one.
func TestDeviceDivergenceGuard(t *testing.T) {
	train, test := deviceProblem(t)
	c := deviceCases[2]
	c.opt.LR = math.MaxFloat64
	for _, dev := range []string{DeviceCPU, DeviceCUDA} {
		cfg, smp, pv := c.build(t, train, 1, dev)
		cfg.Checkpoint = CheckpointOptions{Path: filepath.Join(t.TempDir(), "d.ckpt"), Every: 1}
		res, err := Train(context.Background(), cfg, train, test, smp, pv, nil)
		if !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), "parameters became non-finite") {
			t.Fatalf("%s: err %v, want ErrDiverged naming the parameters", dev, err)
		}
		if res == nil || res.Device != dev || !res.Diverged || res.DivergedAt != 1 || res.LastCheckpointStep != 0 {
			t.Fatalf("%s: result %+v", dev, res)
		}
	}
}
