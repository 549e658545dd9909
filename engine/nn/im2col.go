package nn

import (
	"fmt"
	"runtime"
	"sync"

	"gorgonia.org/tensor"
)

// im2col writes the patch matrix of images x (B×C×H×W) for convolution g into dst
// (B·outH·outW × C·k·k), in the layout Gorgonia's Im2Col uses: rows example-major then
// output row then output column; columns channel-major then kernel row then kernel column;
// zero padding outside the image. Examples are split over GOMAXPROCS goroutines.
func im2col(dst, x *tensor.Dense, g convGeom) error {
	xs := x.Shape()
	if len(xs) != 4 || xs[1] != g.inC || xs[2] != g.inH || xs[3] != g.inW {
		return fmt.Errorf("nn: input shape %v, want (B, %d, %d, %d)", xs, g.inC, g.inH, g.inW)
	}
	b := xs[0]
	if dst.Shape()[0] != b*g.positions {
		return fmt.Errorf("nn: input batch %d does not match the net's", b)
	}
	switch d := dst.Data().(type) {
	case []float32:
		s, ok := x.Data().([]float32)
		if !ok {
			return fmt.Errorf("nn: input dtype %v, want float32", x.Dtype())
		}
		parallelExamples(b, func(i int) { im2colOne(d, s, i, g) })
	case []float64:
		s, ok := x.Data().([]float64)
		if !ok {
			return fmt.Errorf("nn: input dtype %v, want float64", x.Dtype())
		}
		parallelExamples(b, func(i int) { im2colOne(d, s, i, g) })
	}
	return nil
}

func im2colOne[T float32 | float64](dst, src []T, i int, g convGeom) {
	k, st, pad := g.spec.Kernel, g.spec.Stride, g.spec.Pad
	img := src[i*g.inC*g.inH*g.inW : (i+1)*g.inC*g.inH*g.inW]
	row := i * g.positions
	for oy := 0; oy < g.outH; oy++ {
		for ox := 0; ox < g.outW; ox++ {
			out := dst[row*g.patch : (row+1)*g.patch]
			row++
			// The kernel row's columns inside the image, kx in [lo, hi), are one contiguous
			// run of the image row: copied at once, the padding around it cleared.
			x0 := ox*st - pad
			lo, hi := max(0, -x0), min(k, g.inW-x0)
			j := 0
			for c := 0; c < g.inC; c++ {
				plane := img[c*g.inH*g.inW : (c+1)*g.inH*g.inW]
				for ky := 0; ky < k; ky++ {
					dst := out[j : j+k]
					j += k
					y := oy*st - pad + ky
					if y < 0 || y >= g.inH || lo >= hi {
						clear(dst)
						continue
					}
					src := plane[y*g.inW+x0+lo : y*g.inW+x0+hi]
					if lo == 0 && hi == 8 && k == 8 {
						// An interior run of an 8-wide kernel row (the MNIST CNN's first
						// convolution): moved as an array, without copy's call.
						*(*[8]T)(dst) = [8]T(src)
						continue
					}
					clear(dst[:lo])
					copy(dst[lo:hi], src)
					clear(dst[hi:])
				}
			}
		}
	}
}

// parallelExamples runs f(0..n-1) over GOMAXPROCS goroutines in contiguous blocks.
func parallelExamples(n int, f func(i int)) {
	w := runtime.GOMAXPROCS(0)
	if w > n {
		w = n
	}
	if w <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	for k := 0; k < w; k++ {
		lo, hi := k*n/w, (k+1)*n/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				f(i)
			}
		}()
	}
	wg.Wait()
}
