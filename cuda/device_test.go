package cuda

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestOpenInfo(t *testing.T) {
	d := openFake(t)
	in := d.Info()
	if in.Name != "FakeGPU-0" || in.Major != 9 || in.Minor != 0 || in.DriverVersion != 13000 || in.CUBLASVersion != 130100 {
		t.Fatalf("Info = %+v", in)
	}
	if in.Kernels < 15 {
		t.Fatalf("%d kernels loaded", in.Kernels)
	}
	if !strings.Contains(in.String(), "sm_90") {
		t.Fatalf("String() = %q", in.String())
	}
}

func TestMissingLibrary(t *testing.T) {
	_, err := Open(Options{LibCUDA: "/nonexistent/libcuda.so.1"})
	if !errors.Is(err, ErrNoDriver) || !IsUnavailable(err) {
		t.Fatalf("err = %v, want ErrNoDriver", err)
	}
	t.Setenv(EnvLibCUDA, "/nonexistent/libcuda.so.1")
	ok, why := Available(Options{PTX: "x"})
	if ok || !strings.Contains(why, "/nonexistent/libcuda.so.1") {
		t.Fatalf("Available() = %v, %q", ok, why)
	}
}

func TestLibraryWithoutSymbols(t *testing.T) {
	o := fakeOptions(t)
	o.LibCUDA = "libm.so.6" // loads, but is no CUDA driver
	_, err := Open(o)
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "lacks cuInit") {
		t.Fatalf("err = %v, want ErrNoDriver naming cuInit", err)
	}
}

func TestAvailableFake(t *testing.T) {
	o := fakeOptions(t)
	t.Setenv(EnvLibCUDA, o.LibCUDA)
	t.Setenv(EnvLibCUBLAS, o.LibCUBLAS)
	if ok, why := Available(Options{PTX: kernelPTX}); !ok {
		t.Fatalf("Available() = false: %s", why)
	}
}

// TestNoPTX: the device layer loads only the kernels it is given.
func TestNoPTX(t *testing.T) {
	o := fakeOptions(t)
	o.PTX = ""
	if _, err := Open(o); !errors.Is(err, ErrModuleLoad) || !strings.Contains(err.Error(), "no PTX") {
		t.Fatalf("err = %v, want ErrModuleLoad saying no PTX was given", err)
	}
}

func TestBadOrdinalAndOptions(t *testing.T) {
	o := fakeOptions(t)
	o.Ordinal = 3
	if _, err := Open(o); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("ordinal 3: %v, want ErrNoDevice", err)
	}
	o.Ordinal = -1
	if _, err := Open(o); err == nil {
		t.Fatal("ordinal -1 accepted")
	}
}

func TestBadPTX(t *testing.T) {
	o := fakeOptions(t)
	o.PTX = "not ptx"
	_, err := Open(o)
	var ce *Error
	if !errors.Is(err, ErrModuleLoad) || !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_INVALID_IMAGE" {
		t.Fatalf("err = %v, want ErrModuleLoad with CUDA_ERROR_INVALID_IMAGE", err)
	}
}

func TestPoolReuse(t *testing.T) {
	d := openFake(t)
	a := mustAlloc(t, d, 1000)
	if err := d.Free(a); err != nil {
		t.Fatal(err)
	}
	b := mustAlloc(t, d, 900) // same class (1024)
	if b.Ptr() != a.Ptr() {
		t.Fatalf("block not reused: %x then %x", a.Ptr(), b.Ptr())
	}
	c := mustAlloc(t, d, 3000) // another class
	s, err := d.PoolStats()
	if err != nil {
		t.Fatal(err)
	}
	if s.Allocs != 2 || s.Reuses != 1 || s.Outstanding != 2 || s.InUse != 1024+4096 {
		t.Fatalf("stats %+v", s)
	}
	if err := d.Free(c); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(c); err == nil {
		t.Fatal("double Free accepted")
	}
	if err := d.TrimPool(); err != nil {
		t.Fatal(err)
	}
	if s, _ = d.PoolStats(); s.Cached != 0 || s.Trims != 1 {
		t.Fatalf("after trim: %+v", s)
	}
	if _, err := d.Alloc(0); err == nil {
		t.Fatal("Alloc(0) accepted")
	}
}

func TestCopiesAndBounds(t *testing.T) {
	d := openFake(t)
	x := []float32{1, 2, 3, 4, 5}
	b := upload(t, d, x)
	c := mustAlloc(t, d, 20)
	if err := d.Copy(c, b, 20); err != nil {
		t.Fatal(err)
	}
	got := download[float32](t, d, c, 5)
	for i := range x {
		if got[i] != x[i] {
			t.Fatalf("copy: %v", got)
		}
	}
	if err := d.Zero(c, 8); err != nil {
		t.Fatal(err)
	}
	if got = download[float32](t, d, c, 5); got[0] != 0 || got[1] != 0 || got[2] != 3 {
		t.Fatalf("zero: %v", got)
	}
	if err := Upload(d, b, make([]float32, 6)); err == nil {
		t.Fatal("oversized upload accepted")
	}
	if err := Download(d, make([]float64, 3), b); err == nil {
		t.Fatal("oversized download accepted")
	}
}

func TestLaunchChecks(t *testing.T) {
	d := openFake(t)
	b := mustAlloc(t, d, 64)
	if err := d.Launch("no_such_kernel", Dim{1, 1}); !errors.Is(err, ErrModuleLoad) {
		t.Fatalf("unknown kernel: %v", err)
	}
	if err := d.Launch("scale_f32", Dim{1, 1}, b, int64(4)); !errors.Is(err, ErrLaunch) {
		t.Fatalf("wrong arity: %v", err)
	}
	if err := d.Launch("scale_f32", Dim{1, 1}, b, int32(4), float32(2)); !errors.Is(err, ErrLaunch) {
		t.Fatalf("wrong size: %v", err)
	}
	if err := d.Launch("scale_f32", Dim{1, 2048}, b, int64(4), float32(2)); !errors.Is(err, ErrLaunch) {
		t.Fatalf("block 2048: %v", err)
	}
	if err := d.Launch("scale_f32", Dim{1, 1}, b, int64(4), "x"); !errors.Is(err, ErrLaunch) {
		t.Fatalf("string arg: %v", err)
	}
	// A pointer outside every allocation: the fake reports an illegal address.
	bad := Buffer{ptr: 8, bytes: 64}
	err := d.Launch("scale_f32", Dim{1, 1}, bad, int64(4), float32(2))
	var ce *Error
	if !errors.Is(err, ErrLaunch) || !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_ILLEGAL_ADDRESS" {
		t.Fatalf("bad pointer: %v", err)
	}
}

func TestConcurrentCallers(t *testing.T) {
	d := openFake(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			x := make([]float32, 100)
			for i := range x {
				x[i] = float32(g*1000 + i)
			}
			b, err := d.Alloc(400)
			if err != nil {
				errs <- err
				return
			}
			defer d.Free(b)
			for range 20 {
				if err := Upload(d, b, x); err != nil {
					errs <- err
					return
				}
				if err := d.Launch("scale_f32", Grid(100), b, int64(100), float32(1)); err != nil {
					errs <- err
					return
				}
				y := make([]float32, 100)
				if err := Download(d, y, b); err != nil {
					errs <- err
					return
				}
				if y[7] != x[7] {
					errs <- errors.New("data mixed between goroutines")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestEventsTime(t *testing.T) {
	d := openFake(t)
	el, err := d.Elapsed(func() error { time.Sleep(20 * time.Millisecond); return d.Sync() })
	if err != nil {
		t.Fatal(err)
	}
	if el < 15*time.Millisecond || el > 5*time.Second {
		t.Fatalf("elapsed %v for a 20 ms wait", el)
	}
}

func TestCloseTwiceAndUseAfterClose(t *testing.T) {
	d, err := Open(fakeOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Alloc(16); !errors.Is(err, ErrClosed) {
		t.Fatalf("Alloc after Close: %v", err)
	}
}

// runChild runs the named test in a subprocess with the fake driver's fault-injection
// variables (they are read by the C library from the process environment).
func runChild(t *testing.T, test string, env ...string) {
	t.Helper()
	fakeOptions(t)
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), append(env, "FAKECUDA_CHILD=1", "FAKECUDA_DIR="+fakeDir)...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("%s with %v: %v\n%s", test, env, err, out)
	}
}

func child(t *testing.T) bool {
	if os.Getenv("FAKECUDA_CHILD") == "" {
		t.Skip("runs as a subprocess of a fault-injection test")
	}
	return true
}

func TestFaults(t *testing.T) {
	runChild(t, "TestChildNoDevice", "FAKECUDA_NO_DEVICE=1")
	runChild(t, "TestChildModuleFail", "FAKECUDA_MODULE_FAIL=1")
	runChild(t, "TestChildOOM", "FAKECUDA_OOM_AT=3")
	runChild(t, "TestChildLaunchFail", "FAKECUDA_LAUNCH_FAIL=2")
	runChild(t, "TestChildHang", "FAKECUDA_HANG_SYNC=1")
}

func TestChildNoDevice(t *testing.T) {
	child(t)
	_, err := Open(fakeOptions(t))
	var ce *Error
	if !errors.Is(err, ErrNoDevice) || !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_NO_DEVICE" || ce.Op != "cuInit" {
		t.Fatalf("err = %v, want ErrNoDevice from cuInit", err)
	}
	t.Setenv(EnvLibCUDA, fakeOptions(t).LibCUDA)
	if ok, why := Available(Options{PTX: kernelPTX}); ok || !strings.Contains(why, "CUDA_ERROR_NO_DEVICE") {
		t.Fatalf("Available = %v %q", ok, why)
	}
}

func TestChildModuleFail(t *testing.T) {
	child(t)
	_, err := Open(fakeOptions(t))
	if !errors.Is(err, ErrModuleLoad) || !strings.Contains(err.Error(), "CUDA_ERROR_INVALID_PTX") {
		t.Fatalf("err = %v, want ErrModuleLoad with CUDA_ERROR_INVALID_PTX", err)
	}
}

func TestChildOOM(t *testing.T) {
	child(t)
	d := openFake(t)
	a := mustAlloc(t, d, 100)
	b := mustAlloc(t, d, 5000)
	if err := d.Free(b); err != nil {
		t.Fatal(err)
	}
	// The 3rd cuMemAlloc fails: the pool trims its cache and retries, which fails too.
	_, err := d.Alloc(1 << 20)
	var ce *Error
	if !errors.Is(err, ErrOutOfMemory) || !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" {
		t.Fatalf("err = %v, want ErrOutOfMemory", err)
	}
	if s, _ := d.PoolStats(); s.Trims != 1 {
		t.Fatalf("pool did not trim before failing: %+v", s)
	}
	// Cached blocks still serve requests.
	if err := d.Free(a); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Alloc(100); err != nil {
		t.Fatalf("reuse after OOM: %v", err)
	}
}

func TestChildLaunchFail(t *testing.T) {
	child(t)
	d := openFake(t)
	b := mustAlloc(t, d, 64)
	if err := d.Launch("scale_f32", Dim{1, 32}, b, int64(16), float32(1)); err != nil {
		t.Fatalf("first launch: %v", err)
	}
	err := d.Launch("scale_f32", Dim{1, 32}, b, int64(16), float32(1))
	if !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), "CUDA_ERROR_LAUNCH_FAILED") {
		t.Fatalf("err = %v, want ErrLaunch with CUDA_ERROR_LAUNCH_FAILED", err)
	}
}

func TestChildHang(t *testing.T) {
	child(t)
	o := fakeOptions(t)
	o.Timeout = 300 * time.Millisecond
	d, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = d.Sync()
	if !errors.Is(err, ErrTimeout) || time.Since(start) > 5*time.Second {
		t.Fatalf("Sync on a hung driver: %v after %v", err, time.Since(start))
	}
	if _, err := d.Alloc(16); !errors.Is(err, ErrTimeout) {
		t.Fatalf("after a timeout: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close after timeout: %v", err)
	}
}
