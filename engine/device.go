package engine

import (
	"errors"
	"fmt"

	"github.com/dpsgd/dpsgd/cuda"
	"github.com/dpsgd/dpsgd/datasets"
	"gorgonia.org/tensor"
)

// Devices of Config.Device.
const (
	DeviceCPU  = "cpu"  // the Gorgonia graphs and CPU kernels (the default)
	DeviceCUDA = "cuda" // the CUDA backend (a float32 model on the device); a run it cannot take fails
	DeviceAuto = "auto" // the CUDA backend when it can take the run, else the CPU
)

// Precisions of Config.Precision: of the forward and backward GEMMs on the CUDA device.
const (
	PrecisionFP32 = "fp32" // float32 GEMMs (the default)
	// PrecisionBF16: the forward pass's and the backpropagated errors' GEMMs take bfloat16
	// operands with float32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F). Each example's
	// gradient is still formed in float32 from the activations and errors those GEMMs give,
	// its norm taken from the very values that are summed (ghost norms of a dense layer's
	// rows, the materialized Ĝᵢ of a convolution), the clip coefficients, the float64 sums and
	// the noise are those of fp32: the clip bound and the noise are exact regardless, only
	// the gradient's direction is approximate (as any model's is).
	PrecisionBF16 = "bf16"
	// PrecisionFP64 is reported (Result.Precision) for a float64 run; Config takes fp32 or bf16.
	PrecisionFP64 = "fp64"
)

// ErrDeviceUnavailable is wrapped by Train's error when Config.Device is DeviceCUDA and the
// run cannot start on the device: no driver or device, the kernels do not load, the device
// memory does not hold the model and data, or the configuration is one the CUDA backend
// does not run (CUDASupport). A failure after the run started on the device does not wrap it.
var ErrDeviceUnavailable = errors.New("engine: the CUDA device cannot take this run")

// CUDASupport returns nil when the CUDA backend runs cfg's configuration, else why not: it
// runs float32 models — logreg, MLP and convolutional models (nn.Arch.Conv: convolutions with
// optional max pooling, in engine/nn's row layout) — with Gaussian or ball noise from the
// seeded stream, any optimizer, schedule and moving average; float64 and secure noise run on
// the CPU only. It does not look for a device.
func CUDASupport(cfg *Config) error {
	switch {
	case cfg.Dtype == tensor.Float64:
		return errors.New("float64 runs on the CPU only (the CUDA backend computes in float32)")
	case !cfg.Arch.OnlyGEMM():
		return errors.New("the CUDA backend runs the preset models only (logreg, mlp, cnn: GEMM-rule layers); a layer-stack model (--model FILE, or the transformer preset) runs on the CPU")
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
	switch c.Precision {
	case "":
		c.Precision = PrecisionFP32
	case PrecisionFP32:
	case PrecisionBF16:
		if c.Device == DeviceCPU {
			return fmt.Errorf("precision %s: the CPU computes in float32 or float64 only; bf16 needs device %s or %s", c.Precision, DeviceCUDA, DeviceAuto)
		}
		if c.Dtype == tensor.Float64 {
			return fmt.Errorf("precision %s with float64: want one of them", c.Precision)
		}
	default:
		return fmt.Errorf("precision %q: want %s or %s", c.Precision, PrecisionFP32, PrecisionBF16)
	}
	return nil
}

// attachDevice puts the run on the CUDA device when cfg.Device asks for it and the device can
// take it (r.dev stays nil for the CPU). Under DeviceAuto every reason not to use the device
// is passed once to cfg.OnDeviceFallback and the run goes on on the CPU; under DeviceCUDA it
// is an error wrapping ErrDeviceUnavailable.
func (r *run[T]) attachDevice(train *datasets.Dataset) error {
	cfg := &r.cfg
	if cfg.Device != DeviceCUDA && cfg.Device != DeviceAuto {
		return nil
	}
	err := CUDASupport(cfg)
	if err == nil {
		err = r.openDevice(train)
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

// openDevice opens the device and puts the run's backend there: the training set, the
// parameters and the optimizer's state uploaded (CUDASupport has made sure T is float32).
func (r *run[T]) openDevice(train *datasets.Dataset) error {
	opt, ok := any(r.opt).(*optimizer[float32])
	if !ok {
		return errors.New("float64 runs on the CPU only (the CUDA backend computes in float32)")
	}
	dev, err := OpenDevice(r.cfg.CUDA)
	if err != nil {
		return err
	}
	be, err := newCUDABackend(dev, &r.cfg, r.params, opt, train)
	if err != nil {
		_ = dev.Close()
		return err
	}
	if r.be != nil {
		r.be.close()
	}
	r.be, r.dev, r.deviceName = be, dev, be.name
	return nil
}

// deviceErr marks an error of the device (driver, cuBLAS, kernels, memory, deadline) as such;
// other errors (the step's own checks) pass unchanged.
func (r *run[T]) deviceErr(err error) error {
	if r.dev != nil && deviceFailure(err) {
		return fmt.Errorf("on the CUDA device: %w", err)
	}
	return err
}

// deviceFailure reports whether err comes from the device (driver, cuBLAS, kernels, memory,
// deadline) rather than from the step's own checks.
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
