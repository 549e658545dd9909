package cuda

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Options configure Open. The zero value opens device 0 with the default libraries and the
// embedded PTX.
type Options struct {
	LibCUDA   string        // driver library path; "" = $DPSGD_LIBCUDA, else libcuda.so.1
	LibCUBLAS string        // cuBLAS path; "" = $DPSGD_LIBCUBLAS, else libcublas.so.13/.12/.11
	Ordinal   int           // device ordinal, ≥ 0
	Timeout   time.Duration // deadline of one request to the device goroutine; 0 = 2 minutes
	// PTX is the kernel module (the text of dpsgd.ptx, which package kernels/cuda embeds: the
	// device layer takes it as data and knows no kernel package). Required.
	PTX string
}

// Info describes the opened device.
type Info struct {
	Name          string
	Ordinal       int
	Major, Minor  int    // compute capability
	TotalMemory   uint64 // bytes
	DriverVersion int    // e.g. 13000 for CUDA 13.0
	CUBLASVersion int
	LibCUDA       string // the libraries loaded
	LibCUBLAS     string
	Kernels       int // entries of the loaded module
}

// Device is one CUDA device with its primary context, one stream, a cuBLAS handle, the loaded
// kernel module and a memory pool. All its methods may be called from any goroutine: each is
// a request to the goroutine that owns the context. After ErrTimeout or Close every method
// fails.
type Device struct {
	reqs    chan request
	quit    chan struct{}
	exited  chan struct{}
	timeout time.Duration
	info    Info

	mu     sync.Mutex
	broken error // set once: ErrTimeout or ErrClosed

	// Owned by the device goroutine only.
	drv    driverAPI
	blas   blasAPI
	dev    cuDevice
	ctx    cuContext
	stream cuStream
	handle uintptr
	module cuModule
	funcs  map[string]kernel
	pool   pool
}

type kernel struct {
	fn     cuFunction
	params []int // byte size of each parameter (4 or 8), from the PTX
}

type request struct {
	fn    func() error
	reply chan error
}

// Available reports whether a CUDA device can be opened with opts (the environment variables
// included) and, if not, why. It opens and closes the device.
func Available(opts Options) (ok bool, why string) {
	d, err := Open(opts)
	if err != nil {
		return false, err.Error()
	}
	if err := d.Close(); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// Open loads the driver and cuBLAS, initializes the device's primary context on a new
// goroutine locked to its OS thread, creates a stream and a cuBLAS handle and loads the
// kernel module. The error wraps ErrNoDriver, ErrNoDevice, ErrModuleLoad, ErrOutOfMemory or
// ErrTimeout.
func Open(opts Options) (*Device, error) {
	if opts.Ordinal < 0 {
		return nil, fmt.Errorf("cuda: ordinal %d: want ≥ 0", opts.Ordinal)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("cuda: timeout %v: want ≥ 0", opts.Timeout)
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	d := &Device{
		reqs: make(chan request), quit: make(chan struct{}), exited: make(chan struct{}),
		timeout: opts.Timeout, funcs: map[string]kernel{},
	}
	started := make(chan error, 1)
	go d.loop(opts, started)
	var err error
	select {
	case err = <-started:
	case <-time.After(opts.Timeout):
		d.setBroken(ErrTimeout)
		return nil, fmt.Errorf("%w: opening the device took longer than %v", ErrTimeout, opts.Timeout)
	}
	if err != nil {
		<-d.exited
		return nil, err
	}
	return d, nil
}

// loop is the device goroutine: it initializes the device, then serves requests until Close.
func (d *Device) loop(opts Options, started chan<- error) {
	runtime.LockOSThread()
	defer close(d.exited)
	if err := d.setup(opts); err != nil {
		d.teardown()
		started <- err
		return
	}
	started <- nil
	for {
		select {
		case r := <-d.reqs:
			r.reply <- d.safe(r.fn)
		case <-d.quit:
			d.teardown()
			return
		}
	}
}

// safe runs fn, turning a panic (a bug in a request, never a driver failure) into an error so
// the device goroutine survives.
func (d *Device) safe(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: request panicked: %v", ErrFailed, p)
		}
	}()
	return fn()
}

func (d *Device) setup(opts Options) error {
	lib, path, err := openLib(libCandidates(opts.LibCUDA, EnvLibCUDA, []string{DefaultLibCUDA}))
	if err != nil {
		return err
	}
	if err := bind(lib, path, d.drv.symbols()); err != nil {
		return err
	}
	d.info.LibCUDA = path
	if err := d.check("cuInit", d.drv.init(0), ErrNoDriver); err != nil {
		return err
	}
	var v int32
	if err := d.check("cuDriverGetVersion", d.drv.driverGetVersion(&v), ErrNoDriver); err != nil {
		return err
	}
	d.info.DriverVersion = int(v)
	var n int32
	if err := d.check("cuDeviceGetCount", d.drv.deviceGetCount(&n), ErrNoDevice); err != nil {
		return err
	}
	if int(n) <= opts.Ordinal {
		return fmt.Errorf("%w: the driver reports %d device(s), ordinal %d requested", ErrNoDevice, n, opts.Ordinal)
	}
	if err := d.check("cuDeviceGet", d.drv.deviceGet(&d.dev, int32(opts.Ordinal)), ErrNoDevice); err != nil {
		return err
	}
	d.info.Ordinal = opts.Ordinal
	name := make([]byte, 256)
	if err := d.check("cuDeviceGetName", d.drv.deviceGetName(&name[0], int32(len(name)), d.dev), ErrNoDevice); err != nil {
		return err
	}
	d.info.Name = cString(unsafe.Pointer(&name[0]))
	var major, minor int32
	if err := d.check("cuDeviceGetAttribute", d.drv.deviceGetAttr(&major, 75, d.dev), ErrNoDevice); err != nil {
		return err
	}
	if err := d.check("cuDeviceGetAttribute", d.drv.deviceGetAttr(&minor, 76, d.dev), ErrNoDevice); err != nil {
		return err
	}
	d.info.Major, d.info.Minor = int(major), int(minor)
	if err := d.check("cuDeviceTotalMem_v2", d.drv.deviceTotalMem(&d.info.TotalMemory, d.dev), ErrNoDevice); err != nil {
		return err
	}
	if err := d.check("cuDevicePrimaryCtxRetain", d.drv.primaryCtxRetain(&d.ctx, d.dev), ErrNoDevice); err != nil {
		return err
	}
	if err := d.check("cuCtxSetCurrent", d.drv.ctxSetCurrent(d.ctx), ErrNoDevice); err != nil {
		return err
	}
	if err := d.check("cuStreamCreate", d.drv.streamCreate(&d.stream, 1), nil); err != nil {
		return err
	}
	blib, bpath, err := openLib(libCandidates(opts.LibCUBLAS, EnvLibCUBLAS, defaultCUBLAS))
	if err != nil {
		return err
	}
	if err := bind(blib, bpath, d.blas.symbols()); err != nil {
		return err
	}
	d.info.LibCUBLAS = bpath
	if err := d.checkBLAS("cublasCreate_v2", d.blas.create(&d.handle)); err != nil {
		return err
	}
	if err := d.checkBLAS("cublasSetStream_v2", d.blas.setStream(d.handle, d.stream)); err != nil {
		return err
	}
	var bv int32
	if err := d.checkBLAS("cublasGetVersion_v2", d.blas.getVersion(d.handle, &bv)); err != nil {
		return err
	}
	d.info.CUBLASVersion = int(bv)
	return d.loadModule(opts.PTX)
}

var (
	entryRE = regexp.MustCompile(`(?s)\.entry\s+([A-Za-z_][A-Za-z0-9_$]*)\s*\(([^)]*)\)`)
	paramRE = regexp.MustCompile(`\.param\s+\.([a-z])(\d+)\s`)
)

// loadModule loads the PTX (NUL-terminated copy) and looks up every .entry, recording its
// parameter sizes so that Launch can check its arguments.
func (d *Device) loadModule(ptx string) error {
	if ptx == "" {
		return fmt.Errorf("cuda: %w: no PTX given (Options.PTX; the engine passes kernels/cuda's)", ErrModuleLoad)
	}
	img := append([]byte(ptx), 0)
	if err := d.check("cuModuleLoadData", d.drv.moduleLoadData(&d.module, unsafe.Pointer(&img[0])), ErrModuleLoad); err != nil {
		return err
	}
	runtime.KeepAlive(img)
	for _, m := range entryRE.FindAllStringSubmatch(ptx, -1) {
		name := m[1]
		var params []int
		for _, p := range paramRE.FindAllStringSubmatch(m[2]+" ", -1) {
			bits := 0
			fmt.Sscan(p[2], &bits)
			params = append(params, bits/8)
		}
		cname := append([]byte(name), 0)
		var f cuFunction
		if err := d.check("cuModuleGetFunction("+name+")", d.drv.moduleGetFunction(&f, d.module, &cname[0]), ErrModuleLoad); err != nil {
			return err
		}
		d.funcs[name] = kernel{fn: f, params: params}
	}
	if len(d.funcs) == 0 {
		return fmt.Errorf("%w: the PTX has no .entry", ErrModuleLoad)
	}
	d.info.Kernels = len(d.funcs)
	return nil
}

// teardown releases what setup acquired (device goroutine).
func (d *Device) teardown() {
	if d.drv.memFree != nil {
		d.pool.release(d)
	}
	if d.module != 0 {
		d.drv.moduleUnload(d.module)
		d.module = 0
	}
	if d.handle != 0 {
		d.blas.destroy(d.handle)
		d.handle = 0
	}
	if d.stream != 0 {
		d.drv.streamDestroy(d.stream)
		d.stream = 0
	}
	if d.ctx != 0 {
		d.drv.primaryCtxRelease(d.dev)
		d.ctx = 0
	}
}

// check turns a CUresult into an *Error (device goroutine).
func (d *Device) check(op string, r cuResult, kind error) error {
	if r == cudaSuccess {
		return nil
	}
	e := &Error{Op: op, Code: int(r), Kind: kindOf(int(r), kind)}
	if d.drv.getErrorName != nil {
		var p unsafe.Pointer
		if d.drv.getErrorName(r, &p) == cudaSuccess {
			e.Name = cString(p)
		}
		if d.drv.getErrorString(r, &p) == cudaSuccess {
			e.Detail = cString(p)
		}
	}
	if e.Name == "" {
		e.Name = fmt.Sprintf("CUresult %d", r)
	}
	return e
}

func (d *Device) checkBLAS(op string, st int32) error {
	if st == 0 {
		return nil
	}
	kind := ErrBLAS
	if st == 3 {
		kind = ErrOutOfMemory
	}
	return &Error{Op: op, Code: int(st), Name: blasStatusName(st), Kind: kind}
}

func (d *Device) setBroken(err error) {
	d.mu.Lock()
	if d.broken == nil {
		d.broken = err
	}
	d.mu.Unlock()
}

func (d *Device) brokenErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.broken
}

// do runs fn on the device goroutine and waits for it, at most the device's timeout.
func (d *Device) do(fn func() error) error {
	if err := d.brokenErr(); err != nil {
		return err
	}
	reply := make(chan error, 1)
	t := time.NewTimer(d.timeout)
	defer t.Stop()
	select {
	case d.reqs <- request{fn, reply}:
	case <-d.exited:
		return ErrClosed
	case <-t.C:
		d.setBroken(ErrTimeout)
		return fmt.Errorf("%w: the device goroutine did not accept a request within %v", ErrTimeout, d.timeout)
	}
	select {
	case err := <-reply:
		return err
	case <-t.C:
		d.setBroken(ErrTimeout)
		return fmt.Errorf("%w: a request did not finish within %v; the device is unusable", ErrTimeout, d.timeout)
	}
}

// Close synchronizes, frees every buffer, destroys the stream and cuBLAS handle, unloads the
// module and releases the primary context. A second Close returns nil. Close after a timeout
// does not wait for the hung goroutine.
func (d *Device) Close() error {
	d.mu.Lock()
	prev := d.broken
	if d.broken == nil {
		d.broken = ErrClosed
	}
	d.mu.Unlock()
	switch {
	case prev == ErrClosed:
		return nil
	case prev == ErrTimeout:
		return nil
	}
	close(d.quit)
	select {
	case <-d.exited:
		return nil
	case <-time.After(d.timeout):
		return fmt.Errorf("%w: closing the device", ErrTimeout)
	}
}

// Info describes the device.
func (d *Device) Info() Info { return d.info }

// Sync waits for all queued work of the device's stream.
func (d *Device) Sync() error {
	return d.do(func() error { return d.check("cuStreamSynchronize", d.drv.streamSynchronize(d.stream), ErrLaunch) })
}

// MemInfo returns the free and total device memory.
func (d *Device) MemInfo() (free, total uint64, err error) {
	err = d.do(func() error { return d.check("cuMemGetInfo_v2", d.drv.memGetInfo(&free, &total), nil) })
	return free, total, err
}

// Buffer is a block of device memory from the pool. The zero Buffer is the null pointer.
type Buffer struct {
	ptr   devPtr
	bytes int // requested size
	class int // size class index in the pool
}

// Ptr returns the device address.
func (b Buffer) Ptr() uint64 { return b.ptr }

// Bytes returns the requested size.
func (b Buffer) Bytes() int { return b.bytes }

// Sub returns the bytes bytes of b from byte off on, as a Buffer (for a kernel or copy on
// part of b); the zero Buffer, which fits nothing, when that range is not within b.
func (b Buffer) Sub(off, bytes int) Buffer {
	if b.ptr == 0 || off < 0 || bytes < 0 || off+bytes > b.bytes {
		return Buffer{}
	}
	return Buffer{ptr: b.ptr + uint64(off), bytes: bytes}
}

// Alloc returns a buffer of at least bytes bytes (> 0) from the pool. Its contents are
// undefined. ErrOutOfMemory when the device has no room even after the pool released its
// cached blocks.
func (d *Device) Alloc(bytes int) (Buffer, error) {
	if bytes <= 0 {
		return Buffer{}, fmt.Errorf("cuda: Alloc of %d bytes: want > 0", bytes)
	}
	var b Buffer
	err := d.do(func() error {
		var err error
		b, err = d.pool.alloc(d, bytes)
		return err
	})
	return b, err
}

// Free returns b to the pool (a no-op for the zero Buffer).
func (d *Device) Free(b Buffer) error {
	if b.ptr == 0 {
		return nil
	}
	return d.do(func() error { return d.pool.put(d, b) })
}

// PoolStats reports the pool's counters.
func (d *Device) PoolStats() (PoolStats, error) {
	var s PoolStats
	err := d.do(func() error { s = d.pool.stats; return nil })
	return s, err
}

// TrimPool frees the pool's cached (unused) blocks.
func (d *Device) TrimPool() error {
	return d.do(func() error { return d.pool.trim(d) })
}

func sliceBytes[T any](s []T) int { var z T; return len(s) * int(unsafe.Sizeof(z)) }

// Upload copies src into dst (from its start). It fails if src is larger than dst.
func Upload[T any](d *Device, dst Buffer, src []T) error { return transfer(d, dst, src, true) }

// Download copies the start of src into dst and waits for it (and all earlier work).
func Download[T any](d *Device, dst []T, src Buffer) error { return transfer(d, src, dst, false) }

// transfer copies between host and the start of buf, host → buf when up (queued on the
// stream), else buf → host, then waiting for the stream, so that host holds the values on
// return. It fails if host is larger than buf.
func transfer[T any](d *Device, buf Buffer, host []T, up bool) error {
	n := sliceBytes(host)
	op, dir := "cuMemcpyDtoHAsync_v2", "Download of %d bytes from a %d-byte buffer"
	if up {
		op, dir = "cuMemcpyHtoDAsync_v2", "Upload of %d bytes into a %d-byte buffer"
	}
	if n > buf.bytes {
		return fmt.Errorf("cuda: "+dir, n, buf.bytes)
	}
	if n == 0 {
		return nil
	}
	return d.do(func() error {
		defer runtime.KeepAlive(host)
		p := unsafe.Pointer(&host[0])
		if up {
			return d.check(op, d.drv.memcpyHtoDAsync(buf.ptr, p, uint64(n), d.stream), ErrLaunch)
		}
		if err := d.check(op, d.drv.memcpyDtoHAsync(p, buf.ptr, uint64(n), d.stream), ErrLaunch); err != nil {
			return err
		}
		return d.check("cuStreamSynchronize", d.drv.streamSynchronize(d.stream), ErrLaunch)
	})
}

// Copy copies bytes bytes from src to dst on the device.
func (d *Device) Copy(dst, src Buffer, bytes int) error {
	if bytes > dst.bytes || bytes > src.bytes || bytes < 0 {
		return fmt.Errorf("cuda: Copy of %d bytes between buffers of %d and %d bytes", bytes, dst.bytes, src.bytes)
	}
	if bytes == 0 {
		return nil
	}
	return d.do(func() error {
		return d.check("cuMemcpyDtoDAsync_v2", d.drv.memcpyDtoDAsync(dst.ptr, src.ptr, uint64(bytes), d.stream), ErrLaunch)
	})
}

// Zero sets the first bytes bytes of b to 0.
func (d *Device) Zero(b Buffer, bytes int) error {
	if bytes > b.bytes || bytes < 0 {
		return fmt.Errorf("cuda: Zero of %d bytes in a %d-byte buffer", bytes, b.bytes)
	}
	if bytes == 0 {
		return nil
	}
	return d.do(func() error {
		return d.check("cuMemsetD8Async", d.drv.memsetD8Async(b.ptr, 0, uint64(bytes), d.stream), ErrLaunch)
	})
}

// Dim is a launch shape: Grid blocks of Block threads (1-D).
type Dim struct{ Grid, Block uint32 }

// Launch queues kernel name on the device's stream with args, each an int32, uint32, int64,
// uint64, float32, float64 or Buffer (a device pointer), checked against the kernel's PTX
// parameter list. Errors wrap ErrLaunch (ErrModuleLoad for an unknown kernel).
func (d *Device) Launch(name string, dim Dim, args ...any) error {
	if dim.Grid == 0 || dim.Block == 0 || dim.Block > 1024 {
		return fmt.Errorf("%w: %s: grid %d × block %d: want grid ≥ 1 and block in [1, 1024]", ErrLaunch, name, dim.Grid, dim.Block)
	}
	vals := make([]uint64, len(args))
	sizes := make([]int, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case int32:
			vals[i], sizes[i] = uint64(uint32(v)), 4
		case uint32:
			vals[i], sizes[i] = uint64(v), 4
		case float32:
			vals[i], sizes[i] = uint64(math.Float32bits(v)), 4
		case int64:
			vals[i], sizes[i] = uint64(v), 8
		case uint64:
			vals[i], sizes[i] = v, 8
		case float64:
			vals[i], sizes[i] = math.Float64bits(v), 8
		case Buffer:
			vals[i], sizes[i] = v.ptr, 8
		default:
			return fmt.Errorf("%w: %s: argument %d has unsupported type %T", ErrLaunch, name, i, a)
		}
	}
	return d.do(func() error {
		k, ok := d.funcs[name]
		if !ok {
			return fmt.Errorf("%w: no kernel %q in the module", ErrModuleLoad, name)
		}
		if len(k.params) != len(args) {
			return fmt.Errorf("%w: %s takes %d arguments, got %d", ErrLaunch, name, len(k.params), len(args))
		}
		for i, s := range k.params {
			if s != sizes[i] {
				return fmt.Errorf("%w: %s: argument %d is %d bytes, the kernel wants %d", ErrLaunch, name, i, sizes[i], s)
			}
		}
		var pin runtime.Pinner
		defer pin.Unpin()
		ptrs := make([]unsafe.Pointer, len(vals)+1)
		for i := range vals {
			pin.Pin(&vals[i])
			ptrs[i] = unsafe.Pointer(&vals[i])
		}
		pin.Pin(&ptrs[0])
		r := d.drv.launchKernel(k.fn, dim.Grid, 1, 1, dim.Block, 1, 1, 0, d.stream, unsafe.Pointer(&ptrs[0]), nil)
		return d.check("cuLaunchKernel("+name+")", r, ErrLaunch)
	})
}

// Sgemm computes, for row-major matrices, C = alpha·op(A)·op(B) + beta·C with op(A) m×k,
// op(B) k×n and C m×n (leading dimensions lda, ldb, ldc in elements, row-major), by one
// cublasSgemm_v2 on the column-major transposes: Cᵀ = op(B)ᵀ·op(A)ᵀ.
func (d *Device) Sgemm(tA, tB bool, m, n, k int, alpha float32, a Buffer, lda int, b Buffer, ldb int, beta float32, c Buffer, ldc int) error {
	if m < 0 || n < 0 || k < 0 || m > math.MaxInt32 || n > math.MaxInt32 || k > math.MaxInt32 {
		return fmt.Errorf("%w: Sgemm dimensions m=%d n=%d k=%d out of range", ErrBLAS, m, n, k)
	}
	if m == 0 || n == 0 {
		return nil
	}
	return d.do(func() error {
		al, be := alpha, beta
		st := d.blas.sgemm(d.handle, blasOp(tB), blasOp(tA), int32(n), int32(m), int32(k), &al, b.ptr, int32(ldb), a.ptr, int32(lda), &be, c.ptr, int32(ldc))
		return d.checkBLAS("cublasSgemm_v2", st)
	})
}

// Dgemm is Sgemm in float64 (cublasDgemm_v2), for the clipped sums, which the step keeps in
// float64 as the CPU does (docs/design.md step 5). Each operand must lie within its buffer.
func (d *Device) Dgemm(tA, tB bool, m, n, k int, alpha float64, a Buffer, lda int, b Buffer, ldb int, beta float64, c Buffer, ldc int) error {
	if empty, err := gemmOperands("Dgemm", tA, tB, m, n, k, a, lda, 8, b, ldb, 8, c, ldc, 8); empty || err != nil {
		return err
	}
	return d.do(func() error {
		al, be := alpha, beta
		st := d.blas.dgemm(d.handle, blasOp(tB), blasOp(tA), int32(n), int32(m), int32(k), &al, b.ptr, int32(ldb), a.ptr, int32(lda), &be, c.ptr, int32(ldc))
		return d.checkBLAS("cublasDgemm_v2", st)
	})
}

// cuBLAS and CUDA enumerations of GemmBF16's cublasGemmEx call.
const (
	cudaR32F       = 0  // CUDA_R_32F
	cudaR16BF      = 14 // CUDA_R_16BF
	cublasCompute  = 68 // CUBLAS_COMPUTE_32F: fp32 accumulation
	cublasGemmAuto = -1 // CUBLAS_GEMM_DEFAULT
)

// GemmBF16 is Sgemm with bfloat16 operands a and b (2 bytes a value, ToBF16 makes them) and a
// float32 c, accumulated in float32 (cublasGemmEx, CUBLAS_COMPUTE_32F): the GEMMs of
// --precision bf16. Each product of two bf16 values is exact in float32, so against the
// float32 GEMM of the unrounded operands each entry of c differs by at most
// (2u + u²)·Σ|aᵢ||bᵢ| from the operands' rounding, u = 2⁻⁸, plus float32 summation error.
func (d *Device) GemmBF16(tA, tB bool, m, n, k int, alpha float32, a Buffer, lda int, b Buffer, ldb int, beta float32, c Buffer, ldc int) error {
	if empty, err := gemmOperands("GemmBF16", tA, tB, m, n, k, a, lda, 2, b, ldb, 2, c, ldc, 4); empty || err != nil {
		return err
	}
	return d.do(func() error {
		al, be := alpha, beta
		st := d.blas.gemmEx(d.handle, blasOp(tB), blasOp(tA), int32(n), int32(m), int32(k), &al, b.ptr, cudaR16BF, int32(ldb), a.ptr, cudaR16BF, int32(lda),
			&be, c.ptr, cudaR32F, int32(ldc), cublasCompute, cublasGemmAuto)
		return d.checkBLAS("cublasGemmEx", st)
	})
}

// gemmOperands checks a GEMM's dimensions (each in int32), that its row-major operands
// (op(A) m×k, op(B) k×n, C m×n, elements of asz, bsz and csz bytes) lie within their buffers
// and that the leading dimensions cover their columns; empty reports a GEMM with nothing to
// compute (m or n is 0).
func gemmOperands(name string, tA, tB bool, m, n, k int, a Buffer, lda, asz int, b Buffer, ldb, bsz int, c Buffer, ldc, csz int) (empty bool, err error) {
	if m < 0 || n < 0 || k < 0 || m > math.MaxInt32 || n > math.MaxInt32 || k > math.MaxInt32 {
		return false, fmt.Errorf("%w: %s dimensions m=%d n=%d k=%d out of range", ErrBLAS, name, m, n, k)
	}
	if m == 0 || n == 0 {
		return true, nil
	}
	ar, ac, br, bc := m, k, k, n
	if tA {
		ar, ac = k, m
	}
	if tB {
		br, bc = n, k
	}
	span := func(rows, cols, ld int) int {
		if rows == 0 || cols == 0 {
			return 0
		}
		return (rows-1)*ld + cols
	}
	if lda < ac || ldb < bc || ldc < n {
		return false, fmt.Errorf("%w: %s leading dimensions %d, %d, %d below the columns %d, %d, %d", ErrBLAS, name, lda, ldb, ldc, ac, bc, n)
	}
	return false, firstErr(fits(name+" a", a, span(ar, ac, lda), asz), fits(name+" b", b, span(br, bc, ldb), bsz), fits(name+" c", c, span(m, n, ldc), csz))
}

// blasOp is cuBLAS's operation code: 1 (CUBLAS_OP_T) to transpose, else 0 (CUBLAS_OP_N).
func blasOp(t bool) int32 {
	if t {
		return 1
	}
	return 0
}

// SgemmStridedBatched computes batch row-major GEMMs as Sgemm does, the q-th on the matrices
// starting strideA, strideB and strideC elements after the previous one's in a, b and c, by one
// cublasSgemmStridedBatched. Each matrix must lie within its buffer.
func (d *Device) SgemmStridedBatched(tA, tB bool, m, n, k int, alpha float32, a Buffer, lda, strideA int, b Buffer, ldb, strideB int,
	beta float32, c Buffer, ldc, strideC, batch int) error {
	if m < 0 || n < 0 || k < 0 || batch < 0 || m > math.MaxInt32 || n > math.MaxInt32 || k > math.MaxInt32 || batch > math.MaxInt32 {
		return fmt.Errorf("%w: SgemmStridedBatched dimensions m=%d n=%d k=%d batch=%d out of range", ErrBLAS, m, n, k, batch)
	}
	if m == 0 || n == 0 || batch == 0 {
		return nil
	}
	// The last element each operand's batch reaches, row-major: rows×cols with leading dimension ld.
	extent := func(name string, buf Buffer, rows, cols, ld, stride int) error {
		if ld < cols || stride < 0 {
			return fmt.Errorf("%w: SgemmStridedBatched %s: leading dimension %d < %d columns or stride %d < 0", ErrBLAS, name, ld, cols, stride)
		}
		if rows == 0 || cols == 0 {
			return nil
		}
		return fits("SgemmStridedBatched "+name, buf, (batch-1)*stride+(rows-1)*ld+cols, 4)
	}
	ar, ac := m, k
	if tA {
		ar, ac = k, m
	}
	br, bc := k, n
	if tB {
		br, bc = n, k
	}
	if err := firstErr(extent("a", a, ar, ac, lda, strideA), extent("b", b, br, bc, ldb, strideB), extent("c", c, m, n, ldc, strideC)); err != nil {
		return err
	}
	return d.do(func() error {
		al, be := alpha, beta
		st := d.blas.sgemmSB(d.handle, blasOp(tB), blasOp(tA), int32(n), int32(m), int32(k), &al, b.ptr, int32(ldb), int64(strideB), a.ptr, int32(lda), int64(strideA),
			&be, c.ptr, int32(ldc), int64(strideC), int32(batch))
		return d.checkBLAS("cublasSgemmStridedBatched", st)
	})
}

// Elapsed runs fn (which queues work through d) between two CUDA events on the device's
// stream and returns the time between them as the device measured it.
func (d *Device) Elapsed(fn func() error) (time.Duration, error) {
	var start, end cuEvent
	err := d.do(func() error {
		if err := d.check("cuEventCreate", d.drv.eventCreate(&start, 0), nil); err != nil {
			return err
		}
		if err := d.check("cuEventCreate", d.drv.eventCreate(&end, 0), nil); err != nil {
			return err
		}
		return d.check("cuEventRecord", d.drv.eventRecord(start, d.stream), nil)
	})
	defer func() {
		_ = d.do(func() error {
			if start != 0 {
				d.drv.eventDestroy(start)
			}
			if end != 0 {
				d.drv.eventDestroy(end)
			}
			return nil
		})
	}()
	if err != nil {
		return 0, err
	}
	if err := fn(); err != nil {
		return 0, err
	}
	var ms float32
	err = d.do(func() error {
		if err := d.check("cuEventRecord", d.drv.eventRecord(end, d.stream), nil); err != nil {
			return err
		}
		if err := d.check("cuEventSynchronize", d.drv.eventSynchronize(end), ErrLaunch); err != nil {
			return err
		}
		return d.check("cuEventElapsedTime", d.drv.eventElapsedTime(&ms, start, end), nil)
	})
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}

// describe is a one-line summary of the device, for messages.
func (i Info) String() string {
	return fmt.Sprintf("%s (sm_%d%d, %.1f GiB, driver %d.%d, cuBLAS %d, %d kernels)", strings.TrimSpace(i.Name), i.Major, i.Minor,
		float64(i.TotalMemory)/(1<<30), i.DriverVersion/1000, i.DriverVersion%1000/10, i.CUBLASVersion, i.Kernels)
}

// IsUnavailable reports whether err means that CUDA cannot be used here at all (no driver,
// no device, the kernels do not load), as opposed to a failure during use.
func IsUnavailable(err error) bool {
	return errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNoDevice) || errors.Is(err, ErrModuleLoad)
}
