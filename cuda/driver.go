package cuda

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Environment variables naming the libraries to load instead of the defaults.
const (
	EnvLibCUDA   = "DPSGD_LIBCUDA"
	EnvLibCUBLAS = "DPSGD_LIBCUBLAS"
)

// DefaultLibCUDA is the driver library loaded when neither Options nor DPSGD_LIBCUDA name one.
const DefaultLibCUDA = "libcuda.so.1"

// DefaultLibCUBLAS lists the cuBLAS sonames tried in order.
var defaultCUBLAS = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}

// Handle types of the driver API (opaque pointers or integers in cuda.h).
type (
	cuResult   = int32
	cuDevice   = int32
	cuContext  = uintptr
	cuModule   = uintptr
	cuFunction = uintptr
	cuStream   = uintptr
	cuEvent    = uintptr
	devPtr     = uint64
)

// driverAPI is the table of driver functions, filled by purego.RegisterLibFunc under their
// ABI names (the _v2 variants where cuda.h maps to them).
type driverAPI struct {
	init              func(flags uint32) cuResult
	driverGetVersion  func(v *int32) cuResult
	deviceGetCount    func(n *int32) cuResult
	deviceGet         func(d *cuDevice, ordinal int32) cuResult
	deviceGetName     func(name *byte, n int32, d cuDevice) cuResult
	deviceGetAttr     func(v *int32, attr int32, d cuDevice) cuResult
	deviceTotalMem    func(b *uint64, d cuDevice) cuResult
	primaryCtxRetain  func(c *cuContext, d cuDevice) cuResult
	primaryCtxRelease func(d cuDevice) cuResult
	ctxSetCurrent     func(c cuContext) cuResult
	ctxSynchronize    func() cuResult
	memGetInfo        func(free, total *uint64) cuResult
	memAlloc          func(p *devPtr, bytes uint64) cuResult
	memFree           func(p devPtr) cuResult
	memcpyHtoDAsync   func(dst devPtr, src unsafe.Pointer, bytes uint64, s cuStream) cuResult
	memcpyDtoHAsync   func(dst unsafe.Pointer, src devPtr, bytes uint64, s cuStream) cuResult
	memcpyDtoDAsync   func(dst, src devPtr, bytes uint64, s cuStream) cuResult
	memsetD8Async     func(dst devPtr, v uint8, n uint64, s cuStream) cuResult
	moduleLoadData    func(m *cuModule, image unsafe.Pointer) cuResult
	moduleUnload      func(m cuModule) cuResult
	moduleGetFunction func(f *cuFunction, m cuModule, name *byte) cuResult
	launchKernel      func(f cuFunction, gx, gy, gz, bx, by, bz, shmem uint32, s cuStream, params unsafe.Pointer, extra unsafe.Pointer) cuResult
	streamCreate      func(s *cuStream, flags uint32) cuResult
	streamDestroy     func(s cuStream) cuResult
	streamSynchronize func(s cuStream) cuResult
	eventCreate       func(e *cuEvent, flags uint32) cuResult
	eventDestroy      func(e cuEvent) cuResult
	eventRecord       func(e cuEvent, s cuStream) cuResult
	eventSynchronize  func(e cuEvent) cuResult
	eventElapsedTime  func(ms *float32, start, end cuEvent) cuResult
	getErrorName      func(r cuResult, s *unsafe.Pointer) cuResult
	getErrorString    func(r cuResult, s *unsafe.Pointer) cuResult
}

func (a *driverAPI) symbols() []symbol {
	return []symbol{
		{&a.init, "cuInit"}, {&a.driverGetVersion, "cuDriverGetVersion"},
		{&a.deviceGetCount, "cuDeviceGetCount"}, {&a.deviceGet, "cuDeviceGet"},
		{&a.deviceGetName, "cuDeviceGetName"}, {&a.deviceGetAttr, "cuDeviceGetAttribute"},
		{&a.deviceTotalMem, "cuDeviceTotalMem_v2"},
		{&a.primaryCtxRetain, "cuDevicePrimaryCtxRetain"}, {&a.primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
		{&a.ctxSetCurrent, "cuCtxSetCurrent"}, {&a.ctxSynchronize, "cuCtxSynchronize"},
		{&a.memGetInfo, "cuMemGetInfo_v2"}, {&a.memAlloc, "cuMemAlloc_v2"}, {&a.memFree, "cuMemFree_v2"},
		{&a.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"}, {&a.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"},
		{&a.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"}, {&a.memsetD8Async, "cuMemsetD8Async"},
		{&a.moduleLoadData, "cuModuleLoadData"}, {&a.moduleUnload, "cuModuleUnload"},
		{&a.moduleGetFunction, "cuModuleGetFunction"}, {&a.launchKernel, "cuLaunchKernel"},
		{&a.streamCreate, "cuStreamCreate"}, {&a.streamDestroy, "cuStreamDestroy_v2"},
		{&a.streamSynchronize, "cuStreamSynchronize"},
		{&a.eventCreate, "cuEventCreate"}, {&a.eventDestroy, "cuEventDestroy_v2"},
		{&a.eventRecord, "cuEventRecord"}, {&a.eventSynchronize, "cuEventSynchronize"},
		{&a.eventElapsedTime, "cuEventElapsedTime"},
		{&a.getErrorName, "cuGetErrorName"}, {&a.getErrorString, "cuGetErrorString"},
	}
}

// blasAPI is the table of cuBLAS functions (column-major, pointer mode host).
type blasAPI struct {
	create     func(h *uintptr) int32
	destroy    func(h uintptr) int32
	setStream  func(h uintptr, s cuStream) int32
	getVersion func(h uintptr, v *int32) int32
	sgemm      func(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, a devPtr, lda int32, b devPtr, ldb int32, beta *float32, c devPtr, ldc int32) int32
	dgemm      func(h uintptr, ta, tb int32, m, n, k int32, alpha *float64, a devPtr, lda int32, b devPtr, ldb int32, beta *float64, c devPtr, ldc int32) int32
	gemmEx     func(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, a devPtr, aType int32, lda int32, b devPtr, bType int32, ldb int32, beta *float32, c devPtr, cType int32, ldc int32, compute int32, algo int32) int32
	sgemmSB    func(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, a devPtr, lda int32, sa int64, b devPtr, ldb int32, sb int64, beta *float32, c devPtr, ldc int32, sc int64, batch int32) int32
}

func (a *blasAPI) symbols() []symbol {
	return []symbol{
		{&a.create, "cublasCreate_v2"}, {&a.destroy, "cublasDestroy_v2"},
		{&a.setStream, "cublasSetStream_v2"}, {&a.getVersion, "cublasGetVersion_v2"},
		{&a.sgemm, "cublasSgemm_v2"}, {&a.dgemm, "cublasDgemm_v2"}, {&a.gemmEx, "cublasGemmEx"}, {&a.sgemmSB, "cublasSgemmStridedBatched"},
	}
}

type symbol struct {
	fn   any
	name string
}

// bind checks that every symbol exists (purego.RegisterLibFunc would panic on a missing one)
// and registers it.
func bind(lib uintptr, path string, syms []symbol) error {
	for _, s := range syms {
		if _, err := purego.Dlsym(lib, s.name); err != nil {
			return fmt.Errorf("%w: %s lacks %s: %v", ErrNoDriver, path, s.name, err)
		}
	}
	for _, s := range syms {
		purego.RegisterLibFunc(s.fn, lib, s.name)
	}
	return nil
}

// openLib dlopens the first loadable of the candidates.
func openLib(candidates []string) (uintptr, string, error) {
	var errs []string
	for _, c := range candidates {
		h, err := purego.Dlopen(c, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err == nil {
			return h, c, nil
		}
		errs = append(errs, err.Error())
	}
	return 0, "", fmt.Errorf("%w: cannot load %s: %s", ErrNoDriver, strings.Join(candidates, " or "), strings.Join(errs, "; "))
}

// libCandidates returns the explicit path, else the environment variable's, else defaults.
func libCandidates(explicit, env string, defaults []string) []string {
	if explicit != "" {
		return []string{explicit}
	}
	if v := os.Getenv(env); v != "" {
		return []string{v}
	}
	return defaults
}

// cString copies a NUL-terminated C string (at most 4096 bytes).
func cString(p unsafe.Pointer) string {
	if p == nil {
		return ""
	}
	var b []byte
	for i := 0; i < 4096; i++ {
		c := *(*byte)(unsafe.Add(p, i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}
