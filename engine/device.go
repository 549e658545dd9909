package engine

import (
	"errors"
	"fmt"

	"github.com/dpsgd/dpsgd/cuda"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// Devices of Config.Device.
const (
	DeviceCPU  = "cpu"  // the Gorgonia graphs and CPU kernels (the default)
	DeviceCUDA = "cuda" // the CUDA trainer (package cuda); a run it cannot take fails
	DeviceAuto = "auto" // the CUDA trainer when it can take the run, else the CPU
)

// ErrDeviceUnavailable is wrapped by Train's error when Config.Device is DeviceCUDA and the
// run cannot start on the device: no driver or device, the kernels do not load, the device
// memory does not hold the model and data, or the configuration is one the device trainer
// does not run (CUDASupport). A failure after the run started on the device does not wrap it.
var ErrDeviceUnavailable = errors.New("engine: the CUDA device cannot take this run")

// CUDASupport returns nil when the CUDA trainer runs cfg's configuration, else why not: it
// runs dense float32 models (logreg, MLP) with Gaussian or ball noise from the seeded stream,
// any optimizer, schedule and moving average; convolutional models, float64 and secure
// noise run on the CPU only. It does not look for a device.
func CUDASupport(cfg *Config) error {
	switch {
	case cfg.Dtype == tensor.Float64:
		return errors.New("float64 runs on the CPU only (the CUDA trainer computes in float32)")
	case len(cfg.Arch.Conv) > 0:
		return fmt.Errorf("convolutional models (%s) run on the CPU only (the CUDA trainer runs dense models: logreg, mlp)", cfg.Arch.Kind)
	case cfg.Secure && !cfg.NonPrivate:
		return errors.New("secure noise (Config.Secure, --secure) is drawn on the CPU only (the CUDA kernels draw the seeded Philox stream)")
	}
	return nil
}

// validateDevice checks Config.Device ("" is DeviceCPU).
func (c *Config) validateDevice() error {
	switch c.Device {
	case "":
		c.Device = DeviceCPU
	case DeviceCPU, DeviceCUDA, DeviceAuto:
	default:
		return fmt.Errorf("device %q: want %s, %s or %s", c.Device, DeviceCPU, DeviceCUDA, DeviceAuto)
	}
	return nil
}

// gpu is a run's device side: the device and the trainer holding the training set, the
// parameters and the optimizer state. The run's host parameters and optimizer state are a
// mirror, brought up to date by pull before every use on the host.
type gpu struct {
	dev  *cuda.Device
	tr   *cuda.Trainer
	name string
}

// attachDevice puts the run on the CUDA device when cfg.Device asks for it and the device can
// take it (r.gpu stays nil for the CPU). Under DeviceAuto every reason not to use the device
// is passed once to cfg.OnDeviceFallback and the run goes on on the CPU; under DeviceCUDA it
// is an error wrapping ErrDeviceUnavailable.
func (r *run[T]) attachDevice(train *datasets.Dataset) error {
	cfg := &r.cfg
	if cfg.Device != DeviceCUDA && cfg.Device != DeviceAuto {
		return nil
	}
	err := CUDASupport(cfg)
	if err == nil {
		r.gpu, err = openGPU(cfg, r, train)
	}
	if err == nil {
		return nil
	}
	if cfg.Device == DeviceCUDA {
		return fmt.Errorf("%w: %w", ErrDeviceUnavailable, err)
	}
	if cfg.OnDeviceFallback != nil {
		cfg.OnDeviceFallback(err.Error())
	}
	return nil
}

// openGPU opens the device and uploads the data, the initial parameters and the optimizer's
// configuration (the mapping of Config onto cuda.TrainerConfig).
func openGPU[T kernels.Float](cfg *Config, r *run[T], train *datasets.Dataset) (*gpu, error) {
	dev, err := cuda.Open(cfg.CUDA)
	if err != nil {
		return nil, err
	}
	o := cfg.Optimizer
	tc := cuda.TrainerConfig{
		Arch: cfg.Arch, PhysicalBatch: cfg.PhysicalBatch, NonPrivate: cfg.NonPrivate, NoiseSeed: r.noise,
		Optimizer: o.Name, Momentum: o.Momentum, Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps, WeightDecay: o.WeightDecay,
	}
	if !cfg.NonPrivate {
		tc.Clip, tc.Noise = cfg.Clip, cfg.Noise
		tc.ClipBound = kernels.ClipBound[float32](cfg.Clip) // the host's margin: the same coefficients
		if cfg.Noise == NoiseBall {
			tc.Radius = cfg.Radius
		} else {
			tc.Sigma = cfg.Sigma
		}
	}
	tr, err := cuda.NewTrainer(dev, tc, r.params, train)
	if err != nil {
		_ = dev.Close()
		return nil, err
	}
	return &gpu{dev: dev, tr: tr, name: dev.Info().String()}, nil
}

// close frees the trainer's memory and closes the device.
func (g *gpu) close() {
	_ = g.tr.Close()
	_ = g.dev.Close()
}

// stepGPU is step on the device: the trainer runs steps 2–7 of docs/design.md (the same noise keys,
// (the run's noise key, step, tensor), and the same division by the expected batch size); the host
// keeps the schedule, the moving average and the guards.
func (r *run[T]) stepGPU(idx []int, step, total int, expectedBatch float64) (StepStats, error) {
	cs, err := r.gpu.tr.Step(idx, step, expectedBatch, r.cfg.Optimizer.rate(step, total))
	// A non-finite example has clipping coefficient 0: the CPU counts it among the clipped.
	st := StepStats{BatchSize: cs.BatchSize, Loss: cs.Loss, Correct: cs.Correct, NonFinite: cs.NonFinite, Clipped: cs.Clipped + cs.NonFinite}
	if err != nil {
		if !deviceFailure(err) {
			// The trainer's only error that is not the device's: the noisy gradient it was
			// about to apply was not finite (checkFinite on the CPU).
			return st, fmt.Errorf("engine: %w: %v", ErrDiverged, err)
		}
		return st, fmt.Errorf("on the CUDA device: %w", err)
	}
	if r.ema != nil {
		if err := r.gpu.tr.CopyParams(r.params); err != nil {
			return st, fmt.Errorf("on the CUDA device: %w", err)
		}
		emaUpdate(paramSlices[T](r.ema), paramSlices[T](r.params), r.cfg.Optimizer.EMA)
	}
	return st, nil
}

// deviceFailure reports whether err comes from the device (driver, cuBLAS, kernels, memory,
// deadline) rather than from the trainer's own checks.
func deviceFailure(err error) bool {
	var ce *cuda.Error
	if errors.As(err, &ce) {
		return true
	}
	for _, s := range []error{cuda.ErrNoDriver, cuda.ErrNoDevice, cuda.ErrOutOfMemory, cuda.ErrModuleLoad, cuda.ErrLaunch,
		cuda.ErrBLAS, cuda.ErrTimeout, cuda.ErrClosed, cuda.ErrFailed} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// pull brings the host mirror up to date: the parameters and, with opt, the optimizer state
// (for a checkpoint). Nothing on the CPU.
func (r *run[T]) pull(opt bool) error {
	if r.gpu == nil {
		return nil
	}
	if err := r.gpu.tr.CopyParams(r.params); err != nil {
		return fmt.Errorf("on the CUDA device: %w", err)
	}
	if !opt {
		return nil
	}
	m, v := float32State(r.opt.m), float32State(r.opt.v)
	t, err := r.gpu.tr.OptimizerState(m, v)
	if err != nil {
		return fmt.Errorf("on the CUDA device: %w", err)
	}
	r.opt.t = t
	return nil
}

// push uploads the host parameters and optimizer state (after a restore).
func (r *run[T]) push() error {
	if r.gpu == nil {
		return nil
	}
	if err := r.gpu.tr.LoadParams(r.params); err != nil {
		return fmt.Errorf("on the CUDA device: %w", err)
	}
	if err := r.gpu.tr.SetOptimizerState(float32State(r.opt.m), float32State(r.opt.v), r.opt.t); err != nil {
		return fmt.Errorf("on the CUDA device: %w", err)
	}
	return nil
}

// paramsFinite is the divergence guard's parameter check, on the device when the run is there.
func (r *run[T]) paramsFinite() (bool, error) {
	if r.gpu == nil {
		return finite(paramSlices[T](r.params)), nil
	}
	ok, err := r.gpu.tr.ParamsFinite()
	if err != nil {
		return false, fmt.Errorf("on the CUDA device: %w", err)
	}
	return ok, nil
}

// float32State views optimizer state as float32 (the device runs float32 only: CUDASupport),
// keeping nil for a state the optimizer does not keep.
func float32State[T kernels.Float](ts [][]T) [][]float32 {
	if ts == nil {
		return nil
	}
	out, ok := any(ts).([][]float32)
	if !ok {
		panic("engine: a float64 run on the CUDA device")
	}
	return out
}
