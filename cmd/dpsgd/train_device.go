package main

import (
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/dpsgd/dpsgd/engine"
)

// deviceApply sets where `dpsgd train` runs (rc.cfg.Device) from --device: cpu runs on the
// CPU; auto and cuda use the CUDA backend when the run is one it takes (engine.CUDASupport:
// float32 models, seeded noise) and a GPU is usable (deviceResolve). Under auto every
// reason not to is one line on stderr and the run goes on on the CPU, including a device that
// cannot hold the model and data (the engine's OnDeviceFallback); under cuda it is a usage
// error (exit 2) naming the reason. A device failure after the first step is a run error.
//
// --precision bf16 applies on the GPU only: a run that ends up on the CPU computes in fp32 and
// its one line says so; --device-timeout is the deadline of every call to the GPU (the probe
// included, so a driver that hangs while opening sends auto to the CPU).
func (f *trainFlags) deviceApply(rc *runConfig, stderr io.Writer) error {
	rc.cfg.Device, rc.cfg.Precision = engine.DeviceCPU, engine.PrecisionFP32
	rc.cfg.CUDA.Timeout = f.deviceTimeout
	if f.device == "cpu" {
		return nil
	}
	note := ""
	if f.precision == engine.PrecisionBF16 {
		note = "; --precision bf16 applies on the GPU only, fp32 here"
	}
	if err := engine.CUDASupport(&rc.cfg); err != nil {
		if f.device == "cuda" {
			return usagef("--device cuda: %v", err)
		}
		fmt.Fprintf(stderr, "dpsgd: device auto: running on the CPU: %v%s\n", err, note)
		return nil
	}
	use, err := deviceResolve(f.device, rc.cfg.CUDA, note, stderr)
	if err != nil || !use {
		return err
	}
	rc.cfg.Device, rc.cfg.Precision = engine.DeviceCUDA, f.precision
	if f.device == "auto" {
		rc.cfg.Device = engine.DeviceAuto
		rc.cfg.OnDeviceFallback = func(why string) {
			fmt.Fprintf(stderr, "dpsgd: device auto: the GPU cannot take this run, running on the CPU (%s)%s\n", why, note)
		}
	}
	return nil
}

// checkPrecision checks --precision and --device-timeout: bf16 is the GPU's, so it is refused
// with --device cpu and with --float64.
func (f *trainFlags) checkPrecision() error {
	switch f.precision {
	case engine.PrecisionFP32:
	case engine.PrecisionBF16:
		if f.device == "cpu" {
			return usagef("--precision bf16: the CPU computes in fp32 or fp64 only; want --device cuda or auto")
		}
		if f.float64 {
			return usagef("--precision bf16 with --float64: want one of them")
		}
	default:
		return usagef("--precision %q: want fp32 or bf16", f.precision)
	}
	if f.deviceTimeout <= 0 {
		return usagef("--device-timeout %v: want a duration > 0 (e.g. 2m)", f.deviceTimeout)
	}
	return nil
}

// deviceClassify makes a forced --device cuda that could not start a usage error (exit 2).
func deviceClassify(err error) error {
	if errors.Is(err, engine.ErrDeviceUnavailable) {
		return usageError{fmt.Errorf("--device cuda: %w", err)}
	}
	return err
}

// deviceDescribe names the device the steps ran on, for the JSON's device_name: the GPU, or
// the CPU's platform and threads.
func deviceDescribe(res *engine.Result) string {
	if res.DeviceName != "" {
		return res.DeviceName
	}
	return fmt.Sprintf("CPU (%s/%s, %d threads)", runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
}
