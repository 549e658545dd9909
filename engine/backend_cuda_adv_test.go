package engine

import (
	"math"
	"testing"

	"github.com/dpsgd/dpsgd/cuda"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
)

// backendSums runs a backend's clipped sum of idx (clip bound as run.dpStep's) and returns a
// copy of its float64 sums (the CUDA backend's downloaded).
func backendSums(t *testing.T, be backend, ds *datasets.Dataset, idx []int, clip float64) [][]float64 {
	t.Helper()
	if _, err := be.clippedSum(ds, idx, kernels.ClipBound[float32](clip)); err != nil {
		t.Fatal(err)
	}
	if cb, ok := be.(*cpuBackend[float32]); ok {
		out := make([][]float64, len(cb.sums))
		for p, g := range cb.sums {
			out[p] = append([]float64(nil), g...)
		}
		return out
	}
	gb := be.(*cudaBackend)
	bufs, lens := gb.sums()
	out := make([][]float64, len(bufs))
	for p, buf := range bufs {
		out[p] = make([]float64, lens[p])
		if err := cuda.Download(gb.d, out[p], buf); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestDeviceAdversarialTinyCoefficient: one record of huge features (±3e38) in a logistic
// regression makes its gradient norm about 10³⁹, so a small clip norm gives it a clip
// coefficient below float32's smallest normal, 2⁻¹²⁶, where float32(c) keeps few bits (c
// between 2⁻¹⁵⁰ and 2⁻¹⁴⁹ rounds up to 2⁻¹⁴⁹, up to twice c). The CPU scales such rows by the
// exact product rounded toward zero (kernels.ClipScaleRow); the device must too: over clip
// norms sweeping c through the subnormal range, the record moves the device's float64 sums
// by at most C, as it moves the CPU's, with float32 and with bfloat16 GEMMs.
func TestDeviceAdversarialTinyCoefficient(t *testing.T) {
	const d, n = 2, 4
	ds := &datasets.Dataset{Name: "huge", X: make([]float32, n*d), Y: make([]int, n), N: n, D: d, Classes: 2, Shape: []int{d}}
	for i := range ds.X {
		ds.X[i] = float32(i%5) - 2
	}
	for i := range ds.Y {
		ds.Y[i] = i % 2
	}
	rec := n - 1
	ds.X[rec*d], ds.X[rec*d+1] = 3e38, -3e38 // finite in bfloat16 too
	for _, run := range []struct{ dev, precision string }{{DeviceCPU, PrecisionFP32}, {DeviceCUDA, PrecisionFP32}, {DeviceCUDA, PrecisionBF16}} {
		dev := run.dev + "/" + run.precision
		r := stepRun(t, nn.LogReg([]int{d}, 2), OptimizerConfig{Name: OptimizerSGD, LR: 0.1}, ds, run.dev,
			func(c *Config) { c.PhysicalBatch, c.Replicas, c.Precision = n, 1, run.precision })
		for _, y := range []int{0, 1} {
			// A new *Dataset per label: the device keeps the set it bound and does not see
			// one changed in place.
			ds := &datasets.Dataset{Name: ds.Name, X: ds.X, Y: append([]int(nil), ds.Y...), N: n, D: d, Classes: 2, Shape: []int{d}}
			ds.Y[rec] = y
			worst, worstClip := 0.0, 0.0
			for clip := 2e-7; clip < 1e-4; clip *= 1.07 {
				with, without := backendSums(t, r.be, ds, []int{0, 1, 2, rec}, clip), backendSums(t, r.be, ds, []int{0, 1, 2}, clip)
				s := 0.0
				for p := range with {
					for j := range with[p] {
						s += (with[p][j] - without[p][j]) * (with[p][j] - without[p][j])
					}
				}
				if dd := math.Sqrt(s) / clip; !(dd <= worst) {
					worst, worstClip = dd, clip
				}
			}
			t.Logf("%s, label %d: largest ‖Δ‖/C %.9g (C = %.3g)", dev, y, worst, worstClip)
			if !(worst <= 1+1e-9) {
				t.Errorf("%s, label %d: one record moved the clipped sum by %.6g·C (C = %.3g)", dev, y, worst, worstClip)
			}
		}
	}
}
