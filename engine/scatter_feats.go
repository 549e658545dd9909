package engine

import (
	"github.com/dpsgd/dpsgd/engine/nn"
	"gorgonia.org/tensor"
)

// A model whose first layer is a scatter layer (nn.Scatter) trains and evaluates on the
// scattering features of its datasets, computed once per dataset by the run's
// nn.FeatureCache: the transform has no parameters and uses no data, so the features are the
// same at every step. A replica or evaluator given the cache copies an example's features
// where it would copy its pixels and runs the net on them (nn.Net.RunFeatures); without it
// (Predict, Evaluate) the net computes the features of each batch from the images.

// useFeatures gives the replica the run's feature cache (nil: none).
func (r *replica[T]) useFeatures(c *nn.FeatureCache) {
	if c == nil {
		return
	}
	r.feats = c
	r.fx = tensor.New(tensor.WithShape(r.net.Batch, c.Width()), tensor.Of(r.x.Dtype()))
}

// runNet runs the replica's net on the batch fill copied.
func (r *replica[T]) runNet() error {
	if r.feats != nil {
		return r.net.RunFeatures(r.fx, r.y)
	}
	return r.net.Run(r.x, r.y)
}

// useFeatures gives the evaluator the run's feature cache (nil: none).
func (ev *evaluator[T]) useFeatures(c *nn.FeatureCache) {
	if c == nil {
		return
	}
	ev.feats = c
	ev.fx = tensor.New(tensor.WithShape(ev.net.Batch, c.Width()), tensor.Of(ev.x.Dtype()))
}

// forwardFeatures is forward on rows [lo, hi) of the features f (Width values each).
func (ev *evaluator[T]) forwardFeatures(f []float32, lo, hi int) ([]T, error) {
	d := ev.feats.Width()
	buf := ev.fx.Data().([]T)
	clear(buf)
	for i := lo; i < hi; i++ {
		dst := buf[(i-lo)*d : (i-lo+1)*d]
		for j, v := range f[i*d : (i+1)*d] {
			dst[j] = T(v)
		}
	}
	if err := ev.net.RunFeatures(ev.fx, nil); err != nil {
		return nil, err
	}
	return ev.net.Logits().Data().([]T)[:(hi-lo)*ev.net.Arch.Classes], nil
}
