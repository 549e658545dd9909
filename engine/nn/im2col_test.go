package nn

import (
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"
)

// TestIm2colAgainstLoops: the first convolution's patch matrix equals the element-by-element
// definition (columns channel, kernel row, kernel column; zeros outside the image) for
// kernels with and without padding, strides 1–3, and kernels wider than the padded margin.
func TestIm2colAgainstLoops(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, tc := range []struct{ c, h, w int }{{1, 28, 28}, {3, 7, 9}, {2, 5, 4}} {
		for _, spec := range []ConvSpec{
			{Filters: 2, Kernel: 8, Stride: 2, Pad: 3},
			{Filters: 2, Kernel: 3, Stride: 1, Pad: 1},
			{Filters: 2, Kernel: 2, Stride: 3, Pad: 0},
			{Filters: 2, Kernel: 4, Stride: 1, Pad: 3},
		} {
			arch := Arch{Kind: "cnn", Input: []int{tc.c, tc.h, tc.w}, Classes: 2, Activation: Tanh, Conv: []ConvSpec{spec}}
			if arch.Validate() != nil {
				continue
			}
			geo, err := arch.convShapes()
			if err != nil {
				t.Fatal(err)
			}
			g := geo[0]
			const b = 3
			x := make([]float32, b*tc.c*tc.h*tc.w)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			dst := tensor.New(tensor.WithShape(b*g.positions, g.patch), tensor.Of(tensor.Float32))
			for i := range dst.Data().([]float32) {
				dst.Data().([]float32)[i] = 99 // every entry must be written
			}
			if err := im2col(dst, tensor.New(tensor.WithShape(b, tc.c, tc.h, tc.w), tensor.WithBacking(x)), g); err != nil {
				t.Fatal(err)
			}
			got := dst.Data().([]float32)
			k, st, pad := spec.Kernel, spec.Stride, spec.Pad
			for i := range b {
				for oy := range g.outH {
					for ox := range g.outW {
						row := (i*g.outH+oy)*g.outW + ox
						j := 0
						for c := range tc.c {
							for ky := range k {
								for kx := range k {
									y, xx := oy*st-pad+ky, ox*st-pad+kx
									var want float32
									if y >= 0 && y < tc.h && xx >= 0 && xx < tc.w {
										want = x[((i*tc.c+c)*tc.h+y)*tc.w+xx]
									}
									if v := got[row*g.patch+j]; v != want {
										t.Fatalf("%v %+v: example %d output (%d,%d) column %d = %v, want %v", tc, spec, i, oy, ox, j, v, want)
									}
									j++
								}
							}
						}
					}
				}
			}
		}
	}
}
