package engine

import (
	"sync"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// evaluator is a forward-only graph at the evaluation batch size.
type evaluator[T kernels.Float] struct {
	net *nn.Net
	x   *tensor.Dense
	// feats, when the model's first layer is a scatter layer and the evaluator belongs to a
	// run, holds the datasets' features; fx is then the batch's (scatter_feats.go).
	feats *nn.FeatureCache
	fx    *tensor.Dense
}

func newEvaluator[T kernels.Float](arch nn.Arch, params *nn.Params, batch int) (*evaluator[T], error) {
	net, err := nn.Build(arch, params, batch, false)
	if err != nil {
		return nil, err
	}
	xshape := []int{batch, arch.InputSize()}
	if arch.ImageInput() {
		xshape = append([]int{batch}, arch.Input...)
	}
	return &evaluator[T]{net: net, x: tensor.New(tensor.WithShape(xshape...), tensor.Of(params.Dtype))}, nil
}

// forward runs the graph on rows [lo, hi) of x (row-major, d features each, as datasets hold
// them) and returns their logits, (hi−lo)×K: the net's buffer, valid until the next call. Rows
// past hi in the batch are zero.
func (ev *evaluator[T]) forward(x []float32, d, lo, hi int) ([]T, error) {
	buf := ev.x.Data().([]T)
	clear(buf)
	for i := lo; i < hi; i++ {
		dst := buf[(i-lo)*d : (i-lo+1)*d]
		for j, v := range x[i*d : (i+1)*d] {
			dst[j] = T(v)
		}
	}
	if err := ev.net.Run(ev.x, nil); err != nil {
		return nil, err
	}
	return ev.net.Logits().Data().([]T)[:(hi-lo)*ev.net.Arch.Classes], nil
}

// correct counts the correctly classified examples among ds rows [lo, hi).
func (ev *evaluator[T]) correct(ds *datasets.Dataset, lo, hi int) (int, error) {
	var logits []T
	var err error
	if ev.feats != nil {
		logits, err = ev.forwardFeatures(ev.feats.Of(ds.X, ds.N), lo, hi)
	} else {
		logits, err = ev.forward(ds.X, ds.D, lo, hi)
	}
	if err != nil {
		return 0, err
	}
	k := ds.Classes
	n := 0
	for i := lo; i < hi; i++ {
		if argmax(logits[(i-lo)*k:(i-lo+1)*k]) == ds.Y[i] {
			n++
		}
	}
	return n, nil
}

// evaluate returns the accuracy on ds, batches spread over the evaluators.
func (r *run[T]) evaluate(ds *datasets.Dataset) (float64, error) {
	if ds == nil || ds.N == 0 {
		return 0, nil
	}
	b := r.cfg.EvalBatch
	nb := (ds.N + b - 1) / b
	counts := make([]int, len(r.evals))
	errs := make([]error, len(r.evals))
	var wg sync.WaitGroup
	for ei, ev := range r.evals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := ei; j < nb; j += len(r.evals) {
				c, err := ev.correct(ds, j*b, min((j+1)*b, ds.N))
				if err != nil {
					errs[ei] = err
					return
				}
				counts[ei] += c
			}
		}()
	}
	wg.Wait()
	total := 0
	for i, err := range errs {
		if err != nil {
			return 0, err
		}
		total += counts[i]
	}
	return float64(total) / float64(ds.N), nil
}
