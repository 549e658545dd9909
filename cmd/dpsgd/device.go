package main

import (
	"fmt"
	"io"

	"github.com/dpsgd/dpsgd/cuda"
	"github.com/dpsgd/dpsgd/engine"
)

// deviceResolve turns --device into a choice: "cpu" never uses the GPU; "auto" uses it when
// the CUDA driver, cuBLAS, a device and the kernels load, and otherwise says once on stderr
// why not and runs on the CPU; "cuda" insists, so an unusable GPU is a usage error (exit 2)
// naming the reason. The driver is found as described at cuda.Open (DPSGD_LIBCUDA,
// DPSGD_LIBCUBLAS override the libraries), opened with opts (its Timeout bounds a hung
// driver); note ends auto's line.
func deviceResolve(name string, opts cuda.Options, note string, stderr io.Writer) (useCUDA bool, err error) {
	switch name {
	case "cpu":
		return false, nil
	case "auto", "":
		if _, err := engine.ProbeDevice(opts); err != nil {
			fmt.Fprintf(stderr, "dpsgd: no usable GPU, running on the CPU (%v)%s\n", err, note)
			return false, nil
		}
		return true, nil
	case "cuda", "gpu":
		if _, err := engine.ProbeDevice(opts); err != nil {
			return false, usagef("--device cuda: no usable GPU: %v", err)
		}
		return true, nil
	}
	return false, usagef("--device %q: want auto, cpu or cuda", name)
}
