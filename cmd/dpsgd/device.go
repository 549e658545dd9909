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
// DPSGD_LIBCUBLAS override the libraries).
func deviceResolve(name string, stderr io.Writer) (useCUDA bool, err error) {
	switch name {
	case "cpu":
		return false, nil
	case "auto", "":
		if _, err := engine.ProbeDevice(cuda.Options{}); err != nil {
			fmt.Fprintf(stderr, "dpsgd: no usable GPU, running on the CPU (%v)\n", err)
			return false, nil
		}
		return true, nil
	case "cuda", "gpu":
		if _, err := engine.ProbeDevice(cuda.Options{}); err != nil {
			return false, usagef("--device cuda: no usable GPU: %v", err)
		}
		return true, nil
	}
	return false, usagef("--device %q: want auto, cpu or cuda", name)
}
