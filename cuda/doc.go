// Package cuda is the device layer of dpsgd: it loads the CUDA driver API (libcuda.so.1) and
// cuBLAS at run time with purego, so the one CGO_ENABLED=0 binary runs with or without a GPU;
// owns the device's primary context on one goroutine locked to its OS thread (every CUDA call
// goes through that goroutine's request channel, so callers on any goroutine are safe, and
// every request has a deadline, so a hung driver gives ErrTimeout rather than a hang); keeps a
// pool of device memory in power-of-two size classes; loads the PTX module it is given
// (Options.PTX: the engine passes the one package kernels/cuda embeds) and launches its
// kernels through typed methods. It is the driver layer only: it knows no model, dataset or
// kernel package (the import rules in internal/layering); the DP step that uses it is the
// engine's CUDA backend (engine/backend_cuda.go).
//
// Errors name the CUDA call and the CUDA error (cuGetErrorName) and wrap one of the sentinels
// ErrNoDriver, ErrNoDevice, ErrOutOfMemory, ErrModuleLoad, ErrLaunch, ErrBLAS, ErrTimeout,
// ErrClosed, so callers fall back to the CPU with errors.Is. Nothing here panics on a driver
// failure.
//
// The kernels reproduce the CPU kernels of package kernels: the noise streams (Gaussian,
// Laplace, ball) bit for bit before the final rounding to float32, the norms, clip
// coefficients and clipped sums to float32 rounding; kernels/cuda's tests check each through
// this package against the CPU. The tests run the whole path through a fake libcuda/libcublas
// (cuda/testdata/fake, built with gcc by BuildFakeDriver) that executes the same dpsgd.cu.
package cuda
