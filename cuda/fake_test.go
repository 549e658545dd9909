package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The fake driver is built once per test binary by TestMain (gcc, from testdata/fake); tests
// open it through Options (or DPSGD_LIBCUDA in subprocesses). fakeDir is "" when gcc is
// missing, and those tests skip saying so.
var fakeDir, fakeWhy string

// kernelPTX and kernelSource are the kernels of package kernels/cuda, read from its files: the
// device layer takes its kernels as data and imports no kernel package, not even in tests.
var kernelPTX, kernelSource string

func readKernels() error {
	ptx, err := os.ReadFile(filepath.Join("..", "kernels", "cuda", "dpsgd.ptx"))
	if err != nil {
		return err
	}
	src, err := os.ReadFile(filepath.Join("..", "kernels", "cuda", "dpsgd.cu"))
	if err != nil {
		return err
	}
	kernelPTX, kernelSource = string(ptx), string(src)
	return nil
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakecuda")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := readKernels(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if os.Getenv("FAKECUDA_CHILD") != "" {
		// A subprocess of a fault-injection test reuses the parent's build.
		fakeDir = os.Getenv("FAKECUDA_DIR")
	} else if _, _, err := BuildFakeDriver(dir, kernelSource); err != nil {
		fakeWhy = err.Error()
	} else {
		fakeDir = dir
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func fakeOptions(t testing.TB) Options {
	t.Helper()
	if fakeDir == "" {
		t.Skip("fake CUDA driver unavailable: " + fakeWhy)
	}
	return Options{LibCUDA: filepath.Join(fakeDir, "libcuda.so.1"), LibCUBLAS: filepath.Join(fakeDir, "libcublas.so.13"), PTX: kernelPTX}
}

// openFake opens the fake device, closed at the end of the test.
func openFake(t testing.TB) *Device {
	t.Helper()
	d, err := Open(fakeOptions(t))
	if err != nil {
		t.Fatalf("Open(fake): %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

func mustAlloc(t testing.TB, d *Device, bytes int) Buffer {
	t.Helper()
	b, err := d.Alloc(bytes)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", bytes, err)
	}
	return b
}

func upload[T any](t testing.TB, d *Device, src []T) Buffer {
	t.Helper()
	var z T
	b := mustAlloc(t, d, max(len(src), 1)*int(sizeOf(z)))
	if err := Upload(d, b, src); err != nil {
		t.Fatal(err)
	}
	return b
}

func download[T any](t testing.TB, d *Device, src Buffer, n int) []T {
	t.Helper()
	out := make([]T, n)
	if err := Download(d, out, src); err != nil {
		t.Fatal(err)
	}
	return out
}

func sizeOf[T any](z T) uintptr {
	switch any(z).(type) {
	case float32, int32, uint32:
		return 4
	case float64, int64, uint64:
		return 8
	}
	panic(fmt.Sprintf("sizeOf %T", z))
}
