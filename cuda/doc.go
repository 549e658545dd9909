// Package cuda is the device layer of dpsgd: it will load the CUDA driver API and
// cuBLAS at run time (no cgo), own the primary context on one OS-locked goroutine,
// and launch the PTX kernels embedded by package kernels.
//
// Until the GPU issue lands this package holds no code: every backend in the engine
// is the CPU one, and `--device auto` resolves to the CPU.
package cuda
