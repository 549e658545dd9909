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
func (f *trainFlags) deviceApply(rc *runConfig, stderr io.Writer) error {
	rc.cfg.Device = engine.DeviceCPU
	if f.device == "cpu" {
		return nil
	}
	if err := engine.CUDASupport(&rc.cfg); err != nil {
		if f.device == "cuda" {
			return usagef("--device cuda: %v", err)
		}
		fmt.Fprintf(stderr, "dpsgd: device auto: running on the CPU: %v\n", err)
		return nil
	}
	use, err := deviceResolve(f.device, stderr)
	if err != nil || !use {
		return err
	}
	rc.cfg.Device = engine.DeviceCUDA
	if f.device == "auto" {
		rc.cfg.Device = engine.DeviceAuto
		rc.cfg.OnDeviceFallback = func(why string) {
			fmt.Fprintf(stderr, "dpsgd: device auto: the GPU cannot take this run, running on the CPU (%s)\n", why)
		}
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
