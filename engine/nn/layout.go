package nn

import "fmt"

// CHWOrder says where each row of GEMM layer li's In×Out weight (li indexes a.Layers()) sits in
// the channels-first order of the same inputs, the order of a model that keeps its activations
// as C×H×W images (PyTorch's Conv2d and Flatten): order[r] is the row-major C×H×W (for a
// convolution, C×k×k patch) index of the input that weight row r multiplies.
//
//   - The first convolution's patch columns are ordered (channel, kernel row, kernel column)
//     (im2col): the identity.
//   - A later convolution's patch columns are ordered (kernel row, kernel column, channel)
//     (rowsOp): order[(ky·k + kx)·C + c] = (c·k + ky)·k + kx.
//   - The first dense layer after the convolutions reads the row layout flattened, (row,
//     column, channel): order[(y·W + x)·C + c] = (c·H + y)·W + x.
//   - Every other dense layer: the identity.
func (a Arch) CHWOrder(li int) ([]int, error) {
	ls, err := a.Layers()
	if err != nil {
		return nil, err
	}
	if li < 0 || li >= len(ls) {
		return nil, fmt.Errorf("arch: layer %d: want one in [0, %d)", li, len(ls))
	}
	order := make([]int, ls[li].In)
	for r := range order {
		order[r] = r
	}
	if len(a.Conv) == 0 || li == 0 || li > len(a.Conv) {
		return order, nil
	}
	geo, err := a.convShapes()
	if err != nil {
		return nil, err
	}
	if li < len(a.Conv) {
		c, k := geo[li].inC, geo[li].spec.Kernel
		for ky := range k {
			for kx := range k {
				for ch := range c {
					order[(ky*k+kx)*c+ch] = (ch*k+ky)*k + kx
				}
			}
		}
		return order, nil
	}
	last := geo[len(geo)-1]
	c, h, w := last.filters, last.poolH, last.poolW
	for y := range h {
		for x := range w {
			for ch := range c {
				order[(y*w+x)*c+ch] = (ch*h+y)*w + x
			}
		}
	}
	return order, nil
}
