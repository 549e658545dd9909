package nn

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The convolutional part of a model works in a "rows" layout: an activation of shape
// B×H×W×C is held as a (B·H·W)×C matrix, rows example-major then image row then column. In
// that layout a convolution is a plain GEMM over im2col patches and needs no transposes.
// rowsOp implements the two data movements between GEMMs as Gorgonia ops, parallel over
// examples (Gorgonia's own Im2Col, MaxPool2D and Transpose run on one core and were half of a
// CNN step in our profile):
//
//   - pool:    max pooling (average pooling with avg set), k×k windows at stride s, no
//     padding;
//   - patches: im2col with zero padding; columns ordered (ky, kx, channel).
//
// Each has a gradient op (rowsDiffOp): the pool gradient routes ∂L/∂y to the first maximum of
// each window (ties broken by scan order, as in the forward pass); the patches gradient adds
// every patch entry back to the pixel it was copied from.
type rowsOp struct {
	opBase
	pool    bool // true: max pool; false: patches
	avg     bool // with pool: average instead of maximum
	b, h, w int  // input geometry (per example h×w positions)
	c       int  // channels = input columns
	k, s    int  // window and stride
	pad     int  // zero padding (patches only)
	oh, ow  int  // output positions per example
	out     ownBuf
	// arg, for a pool whose gradient is in the graph (SymDiff sets keepArg), holds the forward
	// pass's argmax of every output element, as an offset in its example's input block: the
	// gradient routes ∂L/∂y there instead of searching the windows again.
	keepArg bool
	arg     []int32
}

func newRowsOp(pool bool, b, h, w, c, k, s, pad int) *rowsOp {
	op := &rowsOp{pool: pool, b: b, h: h, w: w, c: c, k: k, s: s, pad: pad}
	op.oh = (h+2*pad-k)/s + 1
	op.ow = (w+2*pad-k)/s + 1
	return op
}

func (op *rowsOp) outCols() int {
	if op.pool {
		return op.c
	}
	return op.k * op.k * op.c
}

func (op *rowsOp) Arity() int { return 1 }

func (op *rowsOp) Type() hm.Type { return tensorFnType(2, 1) }

func (op *rowsOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{op.b * op.oh * op.ow, op.outCols()}, nil
}

func (op *rowsOp) Do(inputs ...G.Value) (G.Value, error) { return doInto(op, &op.out, inputs) }

func (op *rowsOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	r := op.b * op.h * op.w
	if len(inputs) == 1 && !isMatrix(inputs[0].Shape(), r, op.c) {
		return nil, fmt.Errorf("%v: input shape %v, want (%d, %d)", op, inputs[0].Shape(), r, op.c)
	}
	return preallocDo(op, prealloc, inputs, []int{r * op.c}, rowsKernel[float32], rowsKernel[float64])
}

func rowsKernel[T float32 | float64](op *rowsOp, out []T, in [][]T) { rowsForward(op, out, in[0]) }

// isMatrix reports whether s is r×c.
func isMatrix(s tensor.Shape, r, c int) bool { return len(s) == 2 && s[0] == r && s[1] == c }

func (op *rowsOp) WriteHash(h hash.Hash) { writeHash(h, op) }
func (op *rowsOp) Hashcode() uint32      { return hashOf(op) }

func (op *rowsOp) String() string {
	kind := "Patches"
	if op.pool {
		kind = "MaxPool"
		if op.avg {
			kind = "AvgPool"
		}
	}
	return fmt.Sprintf("Rows%s{b=%d h=%d w=%d c=%d k=%d s=%d pad=%d}", kind, op.b, op.h, op.w, op.c, op.k, op.s, op.pad)
}

func (op *rowsOp) DiffWRT(int) []bool { return []bool{true} }

func (op *rowsOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	if len(inputs) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(inputs))
	}
	op.keepArg = op.pool && !op.avg
	return gradAt(0, 1, &rowsDiffOp{fwd: op}, inputs[0], grad)
}

// rowsDiffOp computes ∂L/∂x from the forward input x and ∂L/∂y.
type rowsDiffOp struct {
	opBase
	fwd *rowsOp
	out ownBuf
}

func (d *rowsDiffOp) Arity() int { return 2 }

func (d *rowsDiffOp) Type() hm.Type { return tensorFnType(2, 2) }

func (d *rowsDiffOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	op := d.fwd
	return tensor.Shape{op.b * op.h * op.w, op.c}, nil
}

func (d *rowsDiffOp) Do(inputs ...G.Value) (G.Value, error) { return doInto(d, &d.out, inputs) }

func (d *rowsDiffOp) UsePreallocDo(prealloc G.Value, inputs ...G.Value) (G.Value, error) {
	op := d.fwd
	r := op.b * op.oh * op.ow
	if len(inputs) == 2 && !isMatrix(inputs[1].Shape(), r, op.outCols()) {
		return nil, fmt.Errorf("%v: gradient shape %v, want (%d, %d)", d, inputs[1].Shape(), r, op.outCols())
	}
	return preallocDo(d, prealloc, inputs, []int{op.b * op.h * op.w * op.c, r * op.outCols()}, rowsDiffKernel[float32], rowsDiffKernel[float64])
}

func rowsDiffKernel[T float32 | float64](d *rowsDiffOp, out []T, in [][]T) {
	rowsBackward(d.fwd, out, in[0], in[1])
}

func (d *rowsDiffOp) WriteHash(h hash.Hash) { writeHash(h, d) }
func (d *rowsDiffOp) Hashcode() uint32      { return hashOf(d) }
func (d *rowsDiffOp) String() string        { return "Grad" + d.fwd.String() }

func rowsForward[T float32 | float64](op *rowsOp, out, x []T) {
	per := op.h * op.w * op.c
	oper := op.oh * op.ow * op.outCols()
	if op.keepArg && len(op.arg) != op.b*oper {
		op.arg = make([]int32, op.b*oper)
	}
	parallelExamples(op.b, func(i int) {
		xi := x[i*per : (i+1)*per]
		oi := out[i*oper : (i+1)*oper]
		if op.avg {
			avgPoolForward(op, oi, xi)
		} else if op.pool {
			var arg []int32
			if op.keepArg {
				arg = op.arg[i*oper : (i+1)*oper]
			}
			poolForward(op, oi, xi, arg)
		} else {
			patchesForward(op, oi, xi)
		}
	})
}

func rowsBackward[T float32 | float64](op *rowsOp, dx, x, dy []T) {
	per := op.h * op.w * op.c
	oper := op.oh * op.ow * op.outCols()
	parallelExamples(op.b, func(i int) {
		dxi := dx[i*per : (i+1)*per]
		clear(dxi)
		dyi := dy[i*oper : (i+1)*oper]
		switch {
		case op.avg:
			avgPoolBackward(op, dxi, dyi)
		case op.pool && len(op.arg) == op.b*oper:
			for j, a := range op.arg[i*oper : (i+1)*oper] {
				dxi[a] += dyi[j]
			}
		case op.pool:
			poolBackward(op, dxi, x[i*per:(i+1)*per], dyi)
		default:
			patchesBackward(op, dxi, dyi)
		}
	})
}

// poolForward takes each window's maximum, starting from the window's first element and
// replacing it only by a strictly larger one (so a NaN first element stays, and ties go to the
// first in scan order); with arg non-nil it also records where each maximum was.
func poolForward[T float32 | float64](op *rowsOp, out, x []T, arg []int32) {
	if op.s == 1 {
		poolForwardStride1(op, out, x, arg)
		return
	}
	poolForwardWindows(op, out, x, arg)
}

// poolForwardWindows is poolForward window by window, for any stride.
func poolForwardWindows[T float32 | float64](op *rowsOp, out, x []T, arg []int32) {
	c := op.c
	for oy := 0; oy < op.oh; oy++ {
		for ox := 0; ox < op.ow; ox++ {
			o := out[(oy*op.ow+ox)*c : (oy*op.ow+ox+1)*c]
			base := ((oy*op.s)*op.w + ox*op.s) * c
			copy(o, x[base:base+c])
			if arg != nil {
				a := arg[(oy*op.ow+ox)*c : (oy*op.ow+ox+1)*c]
				for ch := range a {
					a[ch] = int32(base + ch)
				}
				for ky := 0; ky < op.k; ky++ {
					for kx := 0; kx < op.k; kx++ {
						at := ((oy*op.s+ky)*op.w + ox*op.s + kx) * c
						src := x[at : at+c]
						o, a := o[:len(src)], a[:len(src)]
						for ch, v := range src {
							if v > o[ch] {
								o[ch], a[ch] = v, int32(at+ch)
							}
						}
					}
				}
				continue
			}
			for ky := 0; ky < op.k; ky++ {
				for kx := 0; kx < op.k; kx++ {
					at := ((oy*op.s+ky)*op.w + ox*op.s + kx) * c
					src := x[at : at+c]
					o := o[:len(src)]
					for ch, v := range src {
						if v > o[ch] {
							o[ch] = v
						}
					}
				}
			}
		}
	}
}

// poolForwardStride1 is poolForward for stride 1, output row by output row: for a window
// offset (ky, kx) the inputs of a whole output row are one contiguous run of the input, so
// each offset is one long loop over ow·c values. Every output element sees the same
// comparisons in the same order as in poolForward.
func poolForwardStride1[T float32 | float64](op *rowsOp, out, x []T, arg []int32) {
	n := op.ow * op.c
	for oy := 0; oy < op.oh; oy++ {
		o := out[oy*n : (oy+1)*n]
		first := oy * op.w * op.c
		copy(o, x[first:first+n])
		var a []int32
		if arg != nil {
			a = arg[oy*n : (oy+1)*n]
			for j := range a {
				a[j] = int32(first + j)
			}
		}
		for ky := 0; ky < op.k; ky++ {
			for kx := 0; kx < op.k; kx++ {
				if ky == 0 && kx == 0 {
					continue
				}
				at := ((oy+ky)*op.w + kx) * op.c
				src := x[at : at+n]
				if a == nil {
					for j, v := range src {
						if v > o[j] {
							o[j] = v
						}
					}
					continue
				}
				if o32, ok := any(o).([]float32); ok {
					maxArg32(o32, a, any(src).([]float32), int32(at))
					continue
				}
				a := a[:len(src)]
				for j, v := range src {
					if v > o[j] {
						o[j], a[j] = v, int32(at+j)
					}
				}
			}
		}
	}
}

// maxArg32 replaces o[j] by src[j] and a[j] by at+j where src[j] > o[j], for every j. The
// selection is on the values' bits, so that the compiler emits conditional moves: with a
// branch, random maxima mispredicted about every other element, and this loop was a fifth of
// the CNN step.
//
// On AVX-512 CPUs it runs 16 elements per instruction (maxArg32AVX512), with the same result
// bit for bit (TestMaxArg32Kernel).
func maxArg32(o []float32, a []int32, src []float32, at int32) {
	o, a = o[:len(src)], a[:len(src)]
	if maxArgAVX512 && len(src) > 0 {
		maxArg32AVX512(&o[0], &a[0], &src[0], len(src), at)
		return
	}
	maxArg32Go(o, a, src, at)
}

// maxArg32Go is maxArg32's loop in Go.
func maxArg32Go(o []float32, a []int32, src []float32, at int32) {
	o, a = o[:len(src)], a[:len(src)]
	for j, v := range src {
		ov := o[j]
		var m uint32 // all ones where src[j] > o[j]
		if v > ov {
			m = ^uint32(0)
		}
		ob, vb := math.Float32bits(ov), math.Float32bits(v)
		o[j] = math.Float32frombits(ob ^ (ob^vb)&m)
		a[j] ^= (a[j] ^ (at + int32(j))) & int32(m)
	}
}

func poolBackward[T float32 | float64](op *rowsOp, dx, x, dy []T) {
	c := op.c
	at := make([]int, c)
	best := make([]T, c)
	for oy := 0; oy < op.oh; oy++ {
		for ox := 0; ox < op.ow; ox++ {
			first := ((oy*op.s)*op.w + ox*op.s) * c
			for ch := range at {
				at[ch], best[ch] = first+ch, x[first+ch]
			}
			for ky := 0; ky < op.k; ky++ {
				for kx := 0; kx < op.k; kx++ {
					base := ((oy*op.s+ky)*op.w + ox*op.s + kx) * c
					src := x[base : base+c]
					for ch, v := range src {
						if v > best[ch] {
							at[ch], best[ch] = base+ch, v
						}
					}
				}
			}
			g := dy[(oy*op.ow+ox)*c : (oy*op.ow+ox+1)*c]
			for ch, v := range g {
				dx[at[ch]] += v
			}
		}
	}
}

func patchesForward[T float32 | float64](op *rowsOp, out, x []T) {
	c, k := op.c, op.k
	cols := k * k * c
	for oy := 0; oy < op.oh; oy++ {
		for ox := 0; ox < op.ow; ox++ {
			o := out[(oy*op.ow+ox)*cols : (oy*op.ow+ox+1)*cols]
			// The kernel row's columns inside the image, kx in [lo, hi), are one contiguous
			// run of (hi − lo)·c values of the image row: copied at once, the padding cleared.
			x0 := ox*op.s - op.pad
			lo, hi := max(0, -x0), min(k, op.w-x0)
			for ky := 0; ky < k; ky++ {
				y := oy*op.s - op.pad + ky
				dst := o[ky*k*c : (ky+1)*k*c]
				if y < 0 || y >= op.h || lo >= hi {
					clear(dst)
					continue
				}
				if lo > 0 {
					clear(dst[:lo*c])
				}
				copy(dst[lo*c:hi*c], x[(y*op.w+x0+lo)*c:(y*op.w+x0+hi)*c])
				if hi < k {
					clear(dst[hi*c:])
				}
			}
		}
	}
}

func patchesBackward[T float32 | float64](op *rowsOp, dx, dy []T) {
	c, k := op.c, op.k
	cols := k * k * c
	for oy := 0; oy < op.oh; oy++ {
		for ox := 0; ox < op.ow; ox++ {
			g := dy[(oy*op.ow+ox)*cols : (oy*op.ow+ox+1)*cols]
			for ky := 0; ky < k; ky++ {
				y := oy*op.s - op.pad + ky
				if y < 0 || y >= op.h {
					continue
				}
				for kx := 0; kx < k; kx++ {
					xx := ox*op.s - op.pad + kx
					if xx < 0 || xx >= op.w {
						continue
					}
					dst := dx[(y*op.w+xx)*c : (y*op.w+xx+1)*c]
					src := g[(ky*k+kx)*c : (ky*k+kx+1)*c]
					for ch := range dst {
						dst[ch] += src[ch]
					}
				}
			}
		}
	}
}
