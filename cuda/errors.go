package cuda

import (
	"errors"
	"fmt"
)

// Sentinels wrapped by every error of this package.
var (
	// ErrNoDriver: libcuda.so.1 (or cuBLAS) cannot be loaded, lacks a symbol, or the driver
	// cannot initialize.
	ErrNoDriver = errors.New("cuda: no usable CUDA driver")
	// ErrNoDevice: the driver loaded but reports no device (or not the requested one).
	ErrNoDevice = errors.New("cuda: no CUDA device")
	// ErrOutOfMemory: device memory is exhausted (after the pool released its cache).
	ErrOutOfMemory = errors.New("cuda: out of device memory")
	// ErrModuleLoad: the PTX did not load or lacks a kernel.
	ErrModuleLoad = errors.New("cuda: kernel module load failed")
	// ErrLaunch: a kernel launch or the work it queued failed.
	ErrLaunch = errors.New("cuda: kernel launch failed")
	// ErrBLAS: a cuBLAS call failed.
	ErrBLAS = errors.New("cuda: cuBLAS call failed")
	// ErrTimeout: a request to the device goroutine did not finish in time; the device is
	// then unusable and every later call fails with it.
	ErrTimeout = errors.New("cuda: device request timed out")
	// ErrClosed: the device was closed.
	ErrClosed = errors.New("cuda: device closed")
	// ErrFailed: any other CUDA error.
	ErrFailed = errors.New("cuda: CUDA call failed")
)

// CUDA driver error codes used below (cuda.h, CUresult).
const (
	cudaSuccess              = 0
	cudaErrOutOfMemory       = 2
	cudaErrNotInitialized    = 3
	cudaErrStubLibrary       = 34
	cudaErrInsufficientDrv   = 35
	cudaErrNoDevice          = 100
	cudaErrInvalidDevice     = 101
	cudaErrInvalidImage      = 200
	cudaErrNoBinaryForGPU    = 209
	cudaErrInvalidPTX        = 218
	cudaErrUnsupportedPTXVer = 222
	cudaErrNotFound          = 500
)

// Error is a failed CUDA driver or cuBLAS call.
type Error struct {
	Op     string // the library function, e.g. "cuMemAlloc_v2"
	Code   int    // CUresult or cublasStatus_t
	Name   string // cuGetErrorName's name, e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Detail string // cuGetErrorString's description, if any
	Kind   error  // the sentinel
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%v: %s: %s (%d)", e.Kind, e.Op, e.Name, e.Code)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Kind }

// kindOf picks the sentinel of a failed call from its code and the kind of operation.
func kindOf(code int, opKind error) error {
	switch code {
	case cudaErrOutOfMemory:
		return ErrOutOfMemory
	case cudaErrNoDevice, cudaErrInvalidDevice:
		return ErrNoDevice
	case cudaErrNotInitialized, cudaErrStubLibrary, cudaErrInsufficientDrv:
		return ErrNoDriver
	case cudaErrInvalidImage, cudaErrNoBinaryForGPU, cudaErrInvalidPTX, cudaErrUnsupportedPTXVer:
		return ErrModuleLoad
	}
	if opKind != nil {
		return opKind
	}
	return ErrFailed
}

// cuBLAS status names (cublas_api.h, cublasStatus_t).
func blasStatusName(st int32) string {
	switch st {
	case 1:
		return "CUBLAS_STATUS_NOT_INITIALIZED"
	case 3:
		return "CUBLAS_STATUS_ALLOC_FAILED"
	case 7:
		return "CUBLAS_STATUS_INVALID_VALUE"
	case 8:
		return "CUBLAS_STATUS_ARCH_MISMATCH"
	case 11:
		return "CUBLAS_STATUS_MAPPING_ERROR"
	case 13:
		return "CUBLAS_STATUS_EXECUTION_FAILED"
	case 14:
		return "CUBLAS_STATUS_INTERNAL_ERROR"
	case 15:
		return "CUBLAS_STATUS_NOT_SUPPORTED"
	case 16:
		return "CUBLAS_STATUS_LICENSE_ERROR"
	}
	return fmt.Sprintf("CUBLAS_STATUS_%d", st)
}
