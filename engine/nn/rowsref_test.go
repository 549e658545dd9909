package nn

import "testing"

// TestConvLayoutsMatchLayers: each convolution's layout gives its GEMM layer's shape (In = C·k²
// patch columns, Out = filters, Positions = OutH·OutW), feeds the next layer (its pooled output
// is the next convolution's input, or the first dense layer's In), and a dense model has none.
func TestConvLayoutsMatchLayers(t *testing.T) {
	for _, a := range []Arch{
		CNN([]int{1, 28, 28}, 10, nil, Tanh),
		{Kind: "cnn", Input: []int{2, 7, 6}, Classes: 3, Activation: ReLU, Hidden: []int{5}, Conv: []ConvSpec{
			{Filters: 3, Kernel: 3, Stride: 1, Pad: 1},
			{Filters: 4, Kernel: 3, Stride: 2, Pad: 1, PoolKernel: 2, PoolStride: 2},
		}},
	} {
		ls, err := a.ConvLayouts()
		if err != nil {
			t.Fatal(err)
		}
		shapes, err := a.Layers()
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) != len(a.Conv) {
			t.Fatalf("%d layouts for %d convolutions", len(ls), len(a.Conv))
		}
		for i, l := range ls {
			s, k := shapes[i], l.Spec.Kernel
			if s.In != l.InC*k*k || s.Out != l.Spec.Filters || s.Positions != l.OutH*l.OutW {
				t.Fatalf("conv %d: layout %+v, layer %+v", i, l, s)
			}
			if l.Spec.PoolKernel == 0 && (l.PoolH != l.OutH || l.PoolW != l.OutW) {
				t.Fatalf("conv %d: no pooling but %d×%d → %d×%d", i, l.OutH, l.OutW, l.PoolH, l.PoolW)
			}
			flat := l.Spec.Filters * l.PoolH * l.PoolW
			if i+1 < len(ls) {
				if n := ls[i+1]; n.InC != l.Spec.Filters || n.InH != l.PoolH || n.InW != l.PoolW {
					t.Fatalf("conv %d's output %d×%d×%d is not conv %d's input %+v", i, l.Spec.Filters, l.PoolH, l.PoolW, i+1, n)
				}
			} else if shapes[i+1].In != flat {
				t.Fatalf("last conv's output %d values, first dense layer's In %d", flat, shapes[i+1].In)
			}
		}
	}
	if ls, err := MLP([]int{6}, 2, []int{3}, Tanh).ConvLayouts(); err != nil || ls != nil {
		t.Fatalf("MLP: layouts %v, %v", ls, err)
	}
	if _, err := (Arch{Kind: "cnn", Input: []int{1, 4, 4}, Classes: 1}).ConvLayouts(); err == nil {
		t.Fatal("invalid arch accepted")
	}
}
