package engine

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// Attacks on the layer library's rules beyond TestAdversarialRecordSensitivity's values: a
// record whose per-position gradients cancel inside its own example (the sparse rule), token
// ids of every invalid kind, and normalizations of constant inputs. Each measures the
// engine's own float64 clipped sum with and without the record against C directly (no
// rounding allowance from Σ|terms|, which a cancelling record makes as large as it likes).

// setParam overwrites parameter p's values (float32 or float64) by f(j).
func setParam(p *nn.Param, f func(j int) float64) {
	switch d := p.Value.Data().(type) {
	case []float64:
		for j := range d {
			d[j] = f(j)
		}
	case []float32:
		for j := range d {
			d[j] = float32(f(j))
		}
	}
}

// engineDelta runs the clean batch and the batch with record rec at every position, and
// returns the largest ‖Δ‖/C of the engine's float64 sums, checking on the way that the other
// records' coefficients and taps are bit-identical.
func engineDelta[T kernels.Float](t *testing.T, arch nn.Arch, params *nn.Params, ds *datasets.Dataset, rec, phys int, clip float64) float64 {
	t.Helper()
	h := newAdvHarness[T](t, arch, params, phys, 1)
	defer h.close()
	var clean []int
	for i := range ds.N {
		if i != rec {
			clean = append(clean, i)
		}
	}
	base := h.run(t, ds, clean, clip)
	worst := 0.0
	for pos := 0; pos <= len(clean); pos++ {
		idx := slices.Insert(slices.Clone(clean), pos, rec)
		with := h.run(t, ds, idx, clip)
		for _, j := range clean {
			if !sameRow(with.rows[j], base.rows[j]) {
				t.Errorf("record at %d: record %d's coefficient or taps changed", pos, j)
			}
		}
		d := norm2D(diff2D(with.grads, base.grads)) / clip
		if !(d <= worst) {
			worst = d
		}
	}
	return worst
}

// TestAdversarialSparseCancellation: an embedding record whose positions share one id while
// the model maps those positions to opposite errors (e_1 = −e_0, huge). Its table gradient,
// grouped by id, is exactly zero, so it is not clipped by the table; added position by
// position, c·e_0 then c·e_1 into the rows the other records already filled would round
// their contributions away. The sum must move by at most C.
func TestAdversarialSparseCancellation(t *testing.T) {
	const l, vocab, dim, k, n = 2, 3, 2, 2, 6
	arch := nn.Arch{Kind: nn.KindStack, Input: []int{l}, Classes: k, Stack: []nn.LayerSpec{
		{Type: "embedding", Vocab: vocab, Dim: dim}, {Type: "flatten"}, {Type: "dense", Units: k},
	}}
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		t.Run(dt.String(), func(t *testing.T) {
			params, err := nn.NewParams(arch, dt, 5)
			if err != nil {
				t.Fatal(err)
			}
			// The dense weight is (l·dim)×k, rows position-major: position 1's rows are the
			// negation of position 0's, scaled far beyond any clip norm.
			const m = 1e20
			setParam(params.List[0], func(j int) float64 {
				row, col := j/k, j%k
				v := m * float64(1+row%dim+col)
				if row >= dim {
					v = -v
				}
				return v
			})
			ds := &datasets.Dataset{Name: "tokens", X: make([]float32, n*l), Y: make([]int, n), N: n, D: l, Classes: k}
			for i := range n - 1 {
				ds.X[i*l], ds.X[i*l+1] = 0, 1 // every clean record has id 0 at position 0
				ds.Y[i] = i % k
			}
			rec := n - 1
			ds.X[rec*l], ds.X[rec*l+1] = 0, 0
			for _, clip := range []float64{1, 1e-3} {
				var d float64
				if dt == tensor.Float32 {
					d = engineDelta[float32](t, arch, params, ds, rec, n, clip)
				} else {
					d = engineDelta[float64](t, arch, params, ds, rec, n, clip)
				}
				t.Logf("C = %g: max ‖Δ‖/C = %.9g", clip, d)
				if !(d <= 1+1e-9) {
					t.Errorf("C = %g: one record moved the clipped sum by %.6g·C", clip, d)
				}
			}
		})
	}
}

// embeddingIDs are the token ids a record may hold: invalid ones of every kind, and valid ones
// concentrated on one row.
func embeddingIDs(vocab int) []struct {
	name string
	v    float32
} {
	return []struct {
		name string
		v    float32
	}{
		{"-1", -1}, {"-0", float32(math.Copysign(0, -1))}, {"0.5", 0.5}, {"vocab-0.5", float32(vocab) - 0.5},
		{"vocab", float32(vocab)}, {"vocab+1", float32(vocab + 1)}, {"2^24+2", 1<<24 + 2}, {"2^31", 1 << 31},
		{"2^63", 1 << 63}, {"-2^63", -(1 << 63)}, {"3.4e38", 3.4e38}, {"min subnormal", math.SmallestNonzeroFloat32},
		{"NaN", float32(math.NaN())}, {"+Inf", float32(math.Inf(1))}, {"-Inf", float32(math.Inf(-1))},
		{"last id", float32(vocab - 1)},
	}
}

// TestAdversarialEmbeddingIDs: one record with every position set to one id of embeddingIDs
// (or only its middle position), at every position of the batch, float32 and float64: the
// other records are untouched and the clipped sum moves by at most C.
func TestAdversarialEmbeddingIDs(t *testing.T) {
	const n = 5
	arch := layerTestModels()[5].arch
	vocab := arch.Stack[0].Vocab
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		params, err := nn.NewParams(arch, dt, 11)
		if err != nil {
			t.Fatal(err)
		}
		ds := randomDataset(arch, n, 12)
		tokenize(arch, ds, 12)
		rec, d := n-1, ds.D
		orig := slices.Clone(ds.X[rec*d : (rec+1)*d])
		for _, id := range embeddingIDs(vocab) {
			for _, single := range []bool{false, true} {
				copy(ds.X[rec*d:], orig)
				if single {
					ds.X[rec*d+d/2] = id.v
				} else {
					for j := range d {
						ds.X[rec*d+j] = id.v
					}
				}
				for _, clip := range []float64{1e-6, 1} {
					name := fmt.Sprintf("%v/%s/single=%v/C=%g", dt, id.name, single, clip)
					var delta float64
					if dt == tensor.Float32 {
						delta = engineDelta[float32](t, arch, params, ds, rec, 2, clip)
					} else {
						delta = engineDelta[float64](t, arch, params, ds, rec, 2, clip)
					}
					if !(delta <= 1+1e-9) {
						t.Errorf("%s: one record moved the clipped sum by %.6g·C", name, delta)
					}
				}
			}
		}
		copy(ds.X[rec*d:], orig)
	}
}
