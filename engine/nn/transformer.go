package nn

// TransformerWidth and TransformerHeads are the transformer preset's width (channels per
// position) and attention heads.
const (
	TransformerWidth = 64
	TransformerHeads = 4
)

// TransformerPatch is the transformer preset's patch size on h×w images: the largest of 7
// down to 1 that divides both (7 on MNIST's 28×28: 16 patches; 4 on CIFAR-10's 32×32: 64).
func TransformerPatch(h, w int) int {
	for p := 7; p > 1; p-- {
		if h%p == 0 && w%p == 0 {
			return p
		}
	}
	return 1
}

// Transformer is a small ViT-style classifier for C×H×W images (Dosovitskiy et al., "An Image
// is Worth 16x16 Words: Transformers for Image Recognition at Scale"; the blocks of Vaswani et
// al., "Attention Is All You Need", with the LayerNorm first): a patch embedding (a convolution
// of width filters, kernel = stride = the patch), a learned positional embedding, blocks pre-LN
// blocks (LayerNorm → attention of heads heads → residual; LayerNorm → dense 2·width → GELU →
// dense width → residual), a final LayerNorm, the mean over positions and the dense classifier.
// A layer stack (KindStack): input must be [C, H, W].
func Transformer(input []int, classes, width, heads, blocks int) Arch {
	p := TransformerPatch(input[1], input[2])
	stack := []LayerSpec{{Type: "conv2d", Filters: width, Kernel: p, Stride: p}, {Type: "position"}}
	for range blocks {
		stack = append(stack,
			LayerSpec{Type: "residual", Body: []LayerSpec{{Type: "layernorm"}, {Type: "attention", Heads: heads, Dim: width}}},
			LayerSpec{Type: "residual", Body: []LayerSpec{{Type: "layernorm"}, {Type: "dense", Units: 2 * width}, {Type: "gelu"}, {Type: "dense", Units: width}}})
	}
	stack = append(stack, LayerSpec{Type: "layernorm"}, LayerSpec{Type: "meanpool"}, LayerSpec{Type: "dense", Units: classes})
	return Arch{Kind: KindStack, Input: append([]int(nil), input...), Classes: classes, Stack: stack}
}
