package cuda_test

import (
	"fmt"
	"os"
	"testing"

	drv "github.com/dpsgd/dpsgd/cuda"
	"github.com/dpsgd/dpsgd/kernels"
	kcuda "github.com/dpsgd/dpsgd/kernels/cuda"
)

// The fake driver (cuda/testdata/fake, gcc) runs this package's dpsgd.cu on the CPU; it is
// built once per test binary. fakeDir is "" when gcc is missing, and the device tests skip
// saying so.
var fakeDir, fakeWhy string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kcuda-fake")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if _, _, err := drv.BuildFakeDriver(dir, kcuda.Source()); err != nil {
		fakeWhy = err.Error()
	} else {
		fakeDir = dir
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// openFake opens the fake device with this package's PTX, closed at the end of the test.
func openFake(t testing.TB) *drv.Device {
	t.Helper()
	if fakeDir == "" {
		t.Skip("fake CUDA driver unavailable: " + fakeWhy)
	}
	d, err := drv.Open(drv.Options{LibCUDA: fakeDir + "/libcuda.so.1", LibCUBLAS: fakeDir + "/libcublas.so.13", PTX: kcuda.PTX()})
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

func mustAlloc(t testing.TB, d *drv.Device, bytes int) drv.Buffer {
	t.Helper()
	b, err := d.Alloc(bytes)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", bytes, err)
	}
	return b
}

func upload[T float32 | float64 | int32](t testing.TB, d *drv.Device, src []T) drv.Buffer {
	t.Helper()
	var z T
	size := 4
	if _, ok := any(z).(float64); ok {
		size = 8
	}
	b := mustAlloc(t, d, max(len(src), 1)*size)
	if err := drv.Upload(d, b, src); err != nil {
		t.Fatal(err)
	}
	return b
}

func download[T any](t testing.TB, d *drv.Device, src drv.Buffer, n int) []T {
	t.Helper()
	out := make([]T, n)
	if err := drv.Download(d, out, src); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLimitsMatchCPU: the device layer's limits of the noise kernels are the CPU kernels',
// and its key converts field for field.
func TestLimitsMatchCPU(t *testing.T) {
	if drv.MaxStreamLen != kernels.MaxStreamLen || drv.MaxBallRadius != kernels.MaxBallRadius || drv.BallRadiusTensor != kernels.BallRadiusTensor {
		t.Fatalf("device limits (%d, %g, %d) differ from the CPU's (%d, %g, %d)", drv.MaxStreamLen, drv.MaxBallRadius, drv.BallRadiusTensor,
			kernels.MaxStreamLen, kernels.MaxBallRadius, kernels.BallRadiusTensor)
	}
	k := kernels.NoiseKey{Seed: 1<<63 + 5, Step: 1<<40 + 3, Tensor: 7}
	if p := drv.PhiloxKey(k); p.Seed != k.Seed || p.Step != k.Step || p.Tensor != k.Tensor {
		t.Fatalf("PhiloxKey(%+v) = %+v", k, p)
	}
}
