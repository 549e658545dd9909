package nn

import "fmt"

// WideResNet is the WRN-depth-width of De, Berrada, Hayes, Smith and Balle, "Unlocking
// High-Accuracy Differentially Private Image Classification through Scale", as a stack:
// BatchNorm replaced by GroupNorm of 16 groups and every convolution weight-standardized,
// pre-activation residual blocks, ReLU. A 3×3 convolution of 16 filters; three stages of
// (depth − 4)/6 blocks of widths 16·width, 32·width and 64·width, the first block of the
// second and third stages at stride 2; GroupNorm, ReLU, global average pooling and the dense
// classifier. A block whose shape changes normalizes and activates its input once for both
// branches and projects it with a 1×1 convolution at the block's stride (shortcut); the others
// add the input itself. depth must be 6n + 4 (n ≥ 1) and the input an image.
func WideResNet(input []int, classes, depth, width int) (Arch, error) {
	if len(input) != 3 {
		return Arch{}, fmt.Errorf("wide resnet: input %v: want an image [C, H, W]", input)
	}
	if depth < 10 || (depth-4)%6 != 0 || width < 1 {
		return Arch{}, fmt.Errorf("wide resnet: depth %d, width %d: want depth 6n + 4 (n ≥ 1) and width ≥ 1", depth, width)
	}
	const groups = 16
	conv := func(f, k, s, p int) LayerSpec {
		return LayerSpec{Type: "conv2d", Filters: f, Kernel: k, Stride: s, Pad: p, Standardize: true}
	}
	gn := LayerSpec{Type: "groupnorm", Groups: groups}
	relu := LayerSpec{Type: "relu"}
	stack := []LayerSpec{conv(16, 3, 1, 1)}
	c, h, w := 16, input[1], input[2]
	for stage, f := range []int{16 * width, 32 * width, 64 * width} {
		for blk := range (depth - 4) / 6 {
			s := 1
			if stage > 0 && blk == 0 {
				s = 2
			}
			if c != f || s != 1 {
				stack = append(stack, gn, relu, LayerSpec{Type: "residual",
					Body:     []LayerSpec{conv(f, 3, s, 1), gn, relu, conv(f, 3, 1, 1)},
					Shortcut: []LayerSpec{conv(f, 1, s, 0)}})
			} else {
				stack = append(stack, LayerSpec{Type: "residual", Body: []LayerSpec{gn, relu, conv(f, 3, 1, 1), gn, relu, conv(f, 3, 1, 1)}})
			}
			c, h, w = f, (h-1)/s+1, (w-1)/s+1
		}
	}
	stack = append(stack, gn, relu, LayerSpec{Type: "avgpool", Kernel: min(h, w), Stride: min(h, w)},
		LayerSpec{Type: "flatten"}, LayerSpec{Type: "dense", Units: classes})
	a := Arch{Kind: KindStack, Input: append([]int(nil), input...), Classes: classes, Stack: stack}
	if err := a.Validate(); err != nil {
		return Arch{}, fmt.Errorf("wide resnet: %w", err)
	}
	return a, nil
}
