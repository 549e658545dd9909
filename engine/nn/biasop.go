package nn

import (
	"fmt"
	"hash/fnv"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// addBias sets out = x + b row by row for an m×n matrix x and a 1×n bias row b (out may be
// x). Gorgonia's BroadcastAdd first materializes the repeated bias as a full m×n matrix, which
// for a convolution's B·P rows cost as much as the addition itself; gemmOp adds the bias with
// this instead.
func addBias[T float32 | float64](out, x, b []T, m, n int) {
	parallelRows(m, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			o, r := out[i*n:(i+1)*n], x[i*n:(i+1)*n]
			for j, v := range b {
				o[j] = r[j] + v
			}
		}
	})
}

// parallelRows splits [0, m) into one contiguous block per GOMAXPROCS worker when the work is
// large enough to pay for the goroutines.
func parallelRows(m int, f func(lo, hi int)) {
	if m < 4096 {
		f(0, m)
		return
	}
	parallelExamples(2, func(k int) { f(k*m/2, (k+1)*m/2) })
}

// binaryArgs unpacks the two dense inputs and the preallocated output of a two-input op.
func binaryArgs(op fmt.Stringer, prealloc G.Value, inputs []G.Value) (a, b, out *tensor.Dense, err error) {
	if len(inputs) != 2 {
		return nil, nil, nil, fmt.Errorf("%v: %d inputs, want 2", op, len(inputs))
	}
	a, ok1 := inputs[0].(*tensor.Dense)
	b, ok2 := inputs[1].(*tensor.Dense)
	out, ok3 := prealloc.(*tensor.Dense)
	if !ok1 || !ok2 || !ok3 {
		return nil, nil, nil, fmt.Errorf("%v: inputs must be dense tensors", op)
	}
	return a, b, out, nil
}

// hashOf is the Hashcode of an op identified by its String.
func hashOf(op fmt.Stringer) uint32 {
	h := fnv.New32a()
	fmt.Fprint(h, op.String())
	return h.Sum32()
}
