package nn

import (
	"slices"
	"testing"
)

// TestCHWOrderPermutes: every layer's order is a permutation of its weight rows; the first
// convolution's and every dense layer's but the first after the convolutions are the identity;
// a later convolution's and that dense layer's are not; an out-of-range layer is an error.
// (Package model checks the orders against PyTorch's semantics: its oracle and PyTorch itself.)
func TestCHWOrderPermutes(t *testing.T) {
	for _, arch := range []Arch{
		CNN([]int{1, 28, 28}, 10, nil, Tanh),
		{Kind: "cnn", Input: []int{3, 10, 12}, Classes: 4, Activation: ReLU, Hidden: []int{7, 5},
			Conv: []ConvSpec{{Filters: 5, Kernel: 3, Stride: 2, Pad: 1, PoolKernel: 2, PoolStride: 1}, {Filters: 6, Kernel: 2, Stride: 1}}},
		MLP([]int{9}, 4, []int{6, 5}, ReLU),
	} {
		ls, err := arch.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for li, l := range ls {
			order, err := arch.CHWOrder(li)
			if err != nil {
				t.Fatal(err)
			}
			sorted := slices.Sorted(slices.Values(order))
			identity := true
			for i := range sorted {
				if sorted[i] != i {
					t.Fatalf("%s layer %d: order is not a permutation of [0, %d)", arch.Kind, li, l.In)
				}
				identity = identity && order[i] == i
			}
			wantIdentity := len(arch.Conv) == 0 || li == 0 || li > len(arch.Conv)
			if identity != wantIdentity {
				t.Errorf("%s layer %d (%s): identity %v, want %v", arch.Kind, li, l.Name, identity, wantIdentity)
			}
		}
		if _, err := arch.CHWOrder(len(ls)); err == nil {
			t.Errorf("%s: layer %d of %d accepted", arch.Kind, len(ls), len(ls))
		}
	}
}
