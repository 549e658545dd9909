package engine

import (
	"math/rand/v2"

	"github.com/dpsgd/dpsgd/engine/nn"
)

// attentionTestModels are stacks of the transformer's layers (multi-head self-attention,
// learned positions, per-position dense and LayerNorm, the mean over positions) on shapes drawn
// from a fixed seed: an odd number of positions, heads dividing an attention width other than
// the channels, pre-LN residual blocks.
func attentionTestModels() []layerModel {
	r := rand.New(rand.NewPCG(23, 1))
	in := func(lo, hi int) int { return lo + r.IntN(hi-lo+1) }
	k, c := in(2, 4), in(3, 6)
	heads := in(2, 3)
	dim := heads * in(1, 3)
	vocab, seq := in(4, 9), 2*in(1, 3)+1
	return []layerModel{
		// Patches of a 9×9 image (3×3 = 9 positions), then two pre-LN blocks.
		{"vit", nn.Arch{Kind: nn.KindStack, Input: []int{in(1, 2), 9, 9}, Classes: k, Stack: []nn.LayerSpec{
			{Type: "conv2d", Filters: c, Kernel: 3, Stride: 3}, {Type: "position"},
			{Type: "residual", Body: []nn.LayerSpec{{Type: "layernorm"}, {Type: "attention", Heads: heads, Dim: dim}}},
			{Type: "residual", Body: []nn.LayerSpec{{Type: "layernorm"}, {Type: "dense", Units: 2 * c}, {Type: "gelu"}, {Type: "dense", Units: c}}},
			{Type: "layernorm"}, {Type: "meanpool"}, {Type: "dense", Units: k},
		}}},
		// Tokens: an embedding, positions, attention straight on them, a flatten.
		{"attention-embedding", nn.Arch{Kind: nn.KindStack, Input: []int{seq}, Classes: k, Stack: []nn.LayerSpec{
			{Type: "embedding", Vocab: vocab, Dim: c}, {Type: "position"}, {Type: "attention", Heads: 1, Dim: in(1, 4)},
			{Type: "layernorm"}, {Type: "tanh"}, {Type: "flatten"}, {Type: "dense", Units: k},
		}}},
	}
}
