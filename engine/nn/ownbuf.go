package nn

import (
	"fmt"

	"gorgonia.org/tensor"
)

// ownBuf is the output storage of one op of one compiled net, reused by every run.
//
// Gorgonia's tape machine forgets every register when a run ends (Reset), so an op that
// allocates its output in Do allocates it again on every step: megabytes per step for the
// convolution's matrices, whose allocation, zeroing and page faults cost as much as some of
// the ops. An op with an ownBuf returns the same backing array on every run, under a fresh
// tensor header (Gorgonia's Reshape reshapes its input's header in place, so a header is not
// reused).
//
// This is safe because each op instance belongs to one net, which runs one batch at a time,
// and runs once per Run: within a run, the tape machine's register allocation may let a later
// op write into the array after this op's value is dead, exactly as it would into a register
// it had allocated; across runs every value is recomputed before it is read, and what a run
// leaves behind (taps, logits, loss) is copied out by its reads.
type ownBuf struct {
	f32 []float32
	f64 []float64
}

// get returns an r×c tensor of dtype dt over the buffer, allocated on first use.
func (o *ownBuf) get(dt tensor.Dtype, r, c int) (*tensor.Dense, error) {
	n := r * c
	switch dt {
	case tensor.Float32:
		if len(o.f32) != n {
			o.f32 = make([]float32, n)
		}
		return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(o.f32)), nil
	case tensor.Float64:
		if len(o.f64) != n {
			o.f64 = make([]float64, n)
		}
		return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(o.f64)), nil
	}
	return nil, fmt.Errorf("dtype %v not supported", dt)
}
