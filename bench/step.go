package bench

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/dpsgd/dpsgd/cuda"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// Devices of StepConfig.Device.
const (
	DeviceCPU  = "cpu"
	DeviceAuto = "auto" // the CPU, and the GPU too when one is there: CPU against GPU
	DeviceCUDA = "cuda" // the GPU only; rows marked unavailable (with why) when there is none
)

// StepConfig is a step-time comparison.
type StepConfig struct {
	Model      string  // name, for the report
	Arch       nn.Arch // the model
	Dtype      tensor.Dtype
	BatchSizes []int  // logical batch sizes, each ≥ 1
	Device     string // cpu, auto or cuda ("" is auto)
	// PhysicalBatch is the rows of the compiled graph; 0: min(256, batch), as dpsgd train.
	PhysicalBatch int
	Replicas      int           // graph replicas; 0: GOMAXPROCS
	MinTime       time.Duration // measuring time per batch size and mode; 0: 1 s
	MinSteps      int           // at least this many measured steps per mode; 0: 5
	Warmup        int           // untimed steps per mode first; 0: 2
	Seed          uint64
	// CUDA selects the driver libraries (zero value: the defaults and $DPSGD_LIBCUDA).
	CUDA cuda.Options
	// Precision of the GPU rows' GEMMs: engine.PrecisionFP32 ("" too) or PrecisionBF16; the
	// CPU rows compute in Dtype.
	Precision string
}

// StepRow is one device and batch size. Times are means per step; values are null (nil) on a
// device that is not available.
type StepRow struct {
	Device             string   `json:"device"`
	Precision          string   `json:"precision,omitempty"` // of the GEMMs: fp32, fp64 or bf16 (GPU only)
	Available          bool     `json:"available"`
	Note               string   `json:"note,omitempty"`
	BatchSize          int      `json:"batch_size"`
	PhysicalBatch      int      `json:"physical_batch"`
	Steps              int      `json:"steps"` // measured steps per mode
	DPMs               *float64 `json:"dp_ms_per_step"`
	NonPrivateMs       *float64 `json:"nonprivate_ms_per_step"`
	DPExamplesPerSec   *float64 `json:"dp_examples_per_second"`
	NonPrivateExPerSec *float64 `json:"nonprivate_examples_per_second"`
	Ratio              *float64 `json:"ratio_dp_to_nonprivate"` // DP time / non-private time
	OverheadPercent    *float64 `json:"overhead_percent"`
}

// StepResult is the result of Step.
type StepResult struct {
	Model   string    `json:"model"`
	Arch    string    `json:"arch"`
	Params  int       `json:"params"`
	Dtype   string    `json:"dtype"`
	Machine string    `json:"machine"`
	Rows    []StepRow `json:"rows"`
}

// Step times one DP-SGD step (per-example clipping, Gaussian noise σ = 1, C = 1) against one
// non-private step (the same code path without clipping and noise) of the same model at each
// batch size, on random data (4096 examples or the batch size if larger, indices drawn
// uniformly), plain SGD at learning rate 0.1: the method of engine's BenchmarkStep. The two
// modes are measured interleaved (DP, non-private, non-private, DP, ...) in one run, so that
// load from other processes affects both alike. On the GPU (device cuda, or auto when a GPU is
// there) the steps are the engine's CUDA backend's, float32 models only, with the data on the device;
// a GPU that is not there or cannot run the model gives, for every batch size, a row marked
// unavailable with the reason, so the table says why its times are missing.
func Step(ctx context.Context, cfg StepConfig) (*StepResult, error) {
	if err := cfg.Arch.Validate(); err != nil {
		return nil, fmt.Errorf("bench: step: model: %v: %w", err, ErrInvalid)
	}
	if len(cfg.BatchSizes) == 0 {
		return nil, fmt.Errorf("bench: step: batch sizes: want at least one: %w", ErrInvalid)
	}
	for _, b := range cfg.BatchSizes {
		if b < 1 || b > 1<<20 {
			return nil, fmt.Errorf("bench: step: batch size %d: want a value in [1, 1048576]: %w", b, ErrInvalid)
		}
	}
	if cfg.Dtype == (tensor.Dtype{}) {
		cfg.Dtype = tensor.Float32
	}
	if cfg.Dtype != tensor.Float32 && cfg.Dtype != tensor.Float64 {
		return nil, fmt.Errorf("bench: step: dtype %v: want float32 or float64: %w", cfg.Dtype, ErrInvalid)
	}
	if cfg.PhysicalBatch < 0 || cfg.Replicas < 0 || cfg.MinSteps < 0 || cfg.Warmup < 0 || cfg.MinTime < 0 {
		return nil, fmt.Errorf("bench: step: physical batch %d, replicas %d, min steps %d, warmup %d, min time %v: want each ≥ 0: %w",
			cfg.PhysicalBatch, cfg.Replicas, cfg.MinSteps, cfg.Warmup, cfg.MinTime, ErrInvalid)
	}
	if cfg.MinTime == 0 {
		cfg.MinTime = time.Second
	}
	if cfg.MinSteps == 0 {
		cfg.MinSteps = 5
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = 2
	}
	res := &StepResult{Model: cfg.Model, Arch: archString(engine.Config{Arch: cfg.Arch}), Params: cfg.Arch.NumParams(),
		Dtype: cfg.Dtype.String(), Machine: Machine()}
	var cpu, gpu bool
	switch cfg.Device {
	case DeviceCPU:
		cpu = true
	case "", DeviceAuto:
		cpu, gpu = true, true
	case DeviceCUDA:
		gpu = true
	default:
		return nil, fmt.Errorf("bench: step: device %q: want cpu, auto or cuda: %w", cfg.Device, ErrInvalid)
	}
	devName, why := "", ""
	if gpu {
		var err error
		if err = engine.CUDASupport(&engine.Config{Arch: cfg.Arch, Dtype: cfg.Dtype}); err != nil {
			why = err.Error()
		} else if devName, err = engine.ProbeDevice(cfg.CUDA); err != nil {
			why = err.Error()
		}
	}
	for _, b := range cfg.BatchSizes {
		if cpu {
			row, err := stepRow(ctx, cfg, b, cpuSteppers)
			if err != nil {
				return nil, err
			}
			row.Device, row.Precision = DeviceCPU, engine.PrecisionFP32
			if cfg.Dtype == tensor.Float64 {
				row.Precision = engine.PrecisionFP64
			}
			res.Rows = append(res.Rows, row)
		}
		if gpu && devName == "" {
			res.Rows = append(res.Rows, StepRow{Device: DeviceCUDA, BatchSize: b, Note: "unavailable: " + why})
		}
		if devName != "" {
			row, err := stepRow(ctx, cfg, b, gpuSteppers)
			if err != nil {
				return nil, err
			}
			row.Device, row.Note, row.Precision = DeviceCUDA, devName, cmp.Or(cfg.Precision, engine.PrecisionFP32)
			res.Rows = append(res.Rows, row)
		}
	}
	return res, nil
}

// stepper runs logical step n of one mode on a batch (idx) and returns its duration.
type stepper func(idx []int, n int) (time.Duration, error)

// steppers builds the DP (index 0) and non-private (1) steppers of a row on ds; close frees them.
type steppers func(cfg StepConfig, phys, batch int, ds *datasets.Dataset) (modes [2]stepper, close func(), err error)

// cpuSteppers and gpuSteppers run engine.Learner steps, as engine's BenchmarkStep: on the CPU,
// and on the CUDA backend (the data uploaded at the first step; a step returns after the
// device finished, as it reads the step's statistics back).
func cpuSteppers(cfg StepConfig, phys, batch int, ds *datasets.Dataset) ([2]stepper, func(), error) {
	return learnerSteppers(engine.DeviceCPU, cfg, phys, batch, ds)
}

func gpuSteppers(cfg StepConfig, phys, batch int, ds *datasets.Dataset) ([2]stepper, func(), error) {
	return learnerSteppers(engine.DeviceCUDA, cfg, phys, batch, ds)
}

func learnerSteppers(device string, cfg StepConfig, phys, batch int, ds *datasets.Dataset) ([2]stepper, func(), error) {
	var modes [2]stepper
	var learners []*engine.Learner
	closeAll := func() {
		for _, l := range learners {
			l.Close()
		}
	}
	for i := range modes {
		ec := engine.Config{Arch: cfg.Arch, Dtype: cfg.Dtype, PhysicalBatch: phys, Replicas: cfg.Replicas, Epochs: 1,
			Clip: 1, Sigma: 1, NonPrivate: i == 1, Seed: cfg.Seed, Optimizer: engine.OptimizerConfig{Name: engine.OptimizerSGD, LR: 0.1},
			Device: device, CUDA: cfg.CUDA}
		if device == engine.DeviceCUDA {
			ec.Precision = cfg.Precision
		}
		l, err := engine.NewLearner(ec)
		if err != nil {
			closeAll()
			return modes, nil, fmt.Errorf("bench: step: %w", err)
		}
		learners = append(learners, l)
		sigma := 1.0
		if i == 1 {
			sigma = 0
		}
		modes[i] = func(idx []int, n int) (time.Duration, error) {
			t0 := time.Now()
			_, err := l.Step(ds, idx, sigma, kernels.NoiseKey{Seed: cfg.Seed, Step: uint64(n)}, 0.1, float64(batch))
			return time.Since(t0), err
		}
	}
	return modes, closeAll, nil
}

// stepRow measures one batch size.
func stepRow(ctx context.Context, cfg StepConfig, batch int, build steppers) (StepRow, error) {
	phys := cfg.PhysicalBatch
	if phys == 0 {
		phys = 256
	}
	phys = min(phys, batch)
	row := StepRow{Available: true, BatchSize: batch, PhysicalBatch: phys}
	ds := randomData(cfg.Arch, max(4096, batch), cfg.Seed)
	modes, closeModes, err := build(cfg, phys, batch, ds)
	if err != nil {
		return row, err
	}
	defer closeModes()
	rng := rand.New(rand.NewPCG(cfg.Seed, 2))
	idx := make([]int, batch)
	step := func(mode, n int) (time.Duration, error) {
		for j := range idx {
			idx[j] = rng.IntN(ds.N)
		}
		return modes[mode](idx, n)
	}
	var total [2]time.Duration
	n := 0
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return row, err
		}
		measured := i >= cfg.Warmup
		if measured && n >= cfg.MinSteps && total[0] >= cfg.MinTime && total[1] >= cfg.MinTime {
			break
		}
		order := [2]int{0, 1}
		if i%2 == 1 {
			order = [2]int{1, 0}
		}
		for _, mode := range order {
			d, err := step(mode, i)
			if err != nil {
				return row, fmt.Errorf("bench: step: batch %d: %w", batch, err)
			}
			if measured {
				total[mode] += d
			}
		}
		if measured {
			n++
		}
	}
	row.Steps = n
	dp := sig(1000*total[0].Seconds()/float64(n), 4)
	np := sig(1000*total[1].Seconds()/float64(n), 4)
	dpx := sig(float64(batch*n)/total[0].Seconds(), 4)
	npx := sig(float64(batch*n)/total[1].Seconds(), 4)
	ratio := sig(total[0].Seconds()/total[1].Seconds(), 4)
	over := sig(100*(total[0].Seconds()/total[1].Seconds()-1), 3)
	row.DPMs, row.NonPrivateMs, row.DPExamplesPerSec, row.NonPrivateExPerSec, row.Ratio, row.OverheadPercent = &dp, &np, &dpx, &npx, &ratio, &over
	return row, nil
}

// randomData is n examples of standard normal features and uniform labels for arch.
func randomData(arch nn.Arch, n int, seed uint64) *datasets.Dataset {
	r := rand.New(rand.NewPCG(seed, 7))
	d := arch.InputSize()
	ds := &datasets.Dataset{Name: "random", X: make([]float32, n*d), Y: make([]int, n), N: n, D: d, Classes: arch.Classes, Shape: arch.Input}
	for i := range ds.X {
		ds.X[i] = float32(r.NormFloat64())
	}
	for i := range ds.Y {
		ds.Y[i] = r.IntN(arch.Classes)
	}
	return ds
}

// StepTable returns the rows as a Markdown table under a line naming the model once (its
// architecture starts with its kind, which is usually its name), and the reason under it when a
// device's rows are unavailable.
func StepTable(r *StepResult) string {
	model := r.Arch
	if r.Model != "" && !strings.HasPrefix(r.Arch, r.Model+" ") {
		model = r.Model + ": " + r.Arch
	}
	s := fmt.Sprintf("%s (%d parameters, %s), %s\n\n", model, r.Params, r.Dtype, r.Machine)
	s += "| device | batch | physical batch | steps | DP ms/step | non-private ms/step | DP examples/s | non-private examples/s | DP / non-private |\n"
	s += "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
	for _, x := range r.Rows {
		if !x.Available {
			s += fmt.Sprintf("| %s (unavailable) | %d | — | — | — | — | — | — | — |\n", x.Device, x.BatchSize)
			continue
		}
		dev := x.Device
		if x.Precision == engine.PrecisionBF16 {
			dev += " (bf16)"
		}
		s += fmt.Sprintf("| %s | %d | %d | %d | %s | %s | %s | %s | %s |\n", dev, x.BatchSize, x.PhysicalBatch, x.Steps,
			NumPtr(x.DPMs), NumPtr(x.NonPrivateMs), NumPtr(x.DPExamplesPerSec), NumPtr(x.NonPrivateExPerSec), NumPtr(x.Ratio))
	}
	seen := map[string]bool{}
	for _, x := range r.Rows {
		if x.Note != "" && !seen[x.Note] {
			seen[x.Note] = true
			s += "\n" + x.Note + "\n"
		}
	}
	return s
}
