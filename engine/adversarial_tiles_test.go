package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/engine/nn"
	"gorgonia.org/tensor"
)

// TestAdversarialRecordFullTiles is TestAdversarialRecordSensitivity's check on a physical
// batch of 34 records, with the hostile record at the positions around the 16-row tiles of
// the AVX-512 GEMM (internal/avxgemm: full tiles are read in place, the last partial one from
// a zero-padded copy): the 6-record batches of that test put every dense layer's rows in one
// partial tile. Every other record's coefficient and taps must stay bit-identical and the sum
// move by at most C, for the MLP and the CNN. It is meant for DPSGD_BLAS=asm; on any BLAS it
// checks the same property.
func TestAdversarialRecordFullTiles(t *testing.T) {
	const n = 34
	positions := []int{0, 15, 16, 17, 31, 32, 33}
	if testing.Short() {
		positions = []int{15, 16, 33}
	}
	stats := &advStats{exact: map[string]float64{}, own: map[string]float64{}, engine: map[string]float64{}, failures: map[string]int{}}
	for mi, m := range advModels()[1:3] { // mlp, cnn
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			name := fmt.Sprintf("%s/%v", m.name, dt)
			t.Run(name, func(t *testing.T) {
				params, err := nn.NewParams(m.arch, dt, uint64(60+mi))
				if err != nil {
					t.Fatal(err)
				}
				ds := randomDataset(m.arch, n, uint64(70+mi))
				cfgs, clips := []advConfig{{n, 1}}, []float64{1}
				if dt == tensor.Float32 {
					advCheckAt[float32](t, name, m.arch, params, ds, n, positions, cfgs, clips, stats)
				} else {
					advCheckAt[float64](t, name, m.arch, params, ds, n, positions, cfgs, clips, stats)
				}
			})
		}
	}
	if len(stats.first) > 0 {
		t.Errorf("%d kinds of failures; first ones:\n%s", len(stats.failures), strings.Join(stats.first, "\n"))
	}
}
