package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"
)

// TestLossValues: a training net's summed loss equals the loss written out from its logits, the
// textbook formulas (bce: log(1 + eᶻ) − t·z from the one logit z; mse: Σ (z − y)²), with a
// padding row (all-zero label) giving nothing; and for bce the logits the net exposes are
// [0, z], so that their softmax is (1 − σ(z), σ(z)).
func TestLossValues(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, tc := range []struct {
		loss    string
		classes int
		units   int
	}{{LossBCE, 2, 1}, {LossMSE, 4, 4}, {"", 3, 3}} {
		arch := Arch{Kind: KindStack, Input: []int{5}, Classes: tc.classes, Loss: tc.loss,
			Stack: []LayerSpec{{Type: "dense", Units: 4}, {Type: "tanh"}, {Type: "dense", Units: tc.units}}}
		params, err := NewParams(arch, tensor.Float64, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range params.List {
			for j := range p.Value.Data().([]float64) {
				p.Value.Data().([]float64)[j] = 3 * r.NormFloat64()
			}
		}
		const b = 6
		net, err := Build(arch, params, b, true)
		if err != nil {
			t.Fatal(err)
		}
		x := make([]float64, b*5)
		for j := range x {
			x[j] = r.NormFloat64()
		}
		y := make([]float64, b*tc.classes)
		labels := make([]int, b)
		for i := range b - 1 { // the last row is padding
			labels[i] = r.IntN(tc.classes)
			y[i*tc.classes+labels[i]] = 1
		}
		if err := net.Run(tensor.New(tensor.WithShape(b, 5), tensor.WithBacking(x)), tensor.New(tensor.WithShape(b, tc.classes), tensor.WithBacking(y))); err != nil {
			t.Fatal(err)
		}
		z := net.Logits().Data().([]float64)
		if len(z) != b*tc.classes {
			t.Fatalf("%s: %d logits, want %d", tc.loss, len(z), b*tc.classes)
		}
		var want float64
		for i := range b - 1 {
			zi := z[i*tc.classes : (i+1)*tc.classes]
			switch tc.loss {
			case LossBCE:
				if zi[0] != 0 {
					t.Errorf("bce: logits %v, want [0, z]", zi)
				}
				tt := float64(labels[i])
				want += math.Max(zi[1], 0) + math.Log1p(math.Exp(-math.Abs(zi[1]))) - tt*zi[1]
			case LossMSE:
				for k, v := range zi {
					d := v - y[i*tc.classes+k]
					want += d * d
				}
			default:
				var s float64
				for _, v := range zi {
					s += math.Exp(v)
				}
				want += math.Log(s) - zi[labels[i]]
			}
		}
		got := net.Loss()
		if math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) || want == 0 {
			t.Errorf("loss %q: %v, want %v", tc.loss, got, want)
		}
		var rows float64
		for i := range b {
			rows += RowLoss(lossName(tc.loss), z[i*tc.classes:(i+1)*tc.classes], y[i*tc.classes:(i+1)*tc.classes])
		}
		if math.Abs(rows-want) > 1e-12*math.Max(1, math.Abs(want)) {
			t.Errorf("loss %q: RowLoss sums to %v, want %v", tc.loss, rows, want)
		}
		net.Close()
	}
}
