package nn

import (
	"fmt"

	"gorgonia.org/tensor"
)

// GradOracle computes the gradient of one example's loss with respect to every parameter the
// plain way: a batch-1 graph, Gorgonia's BroadcastAdd for the biases and G.Grad with respect to
// the weights. It shares nothing with the per-example path of the training nets but the
// convolution data movements (tested on their own), so tests use it as the reference for
// ghost norms and clipped sums. It is slow by design.
type GradOracle struct{ net *Net }

// NewGradOracle builds the oracle for arch over params.
func NewGradOracle(arch Arch, params *Params) (*GradOracle, error) {
	if err := arch.Validate(); err != nil {
		return nil, err
	}
	n := &Net{Arch: arch, Batch: 1, params: params, train: true, oracle: true}
	n.g = newGraph()
	if err := n.build(); err != nil {
		return nil, fmt.Errorf("nn: building the oracle: %w", err)
	}
	return &GradOracle{net: n}, nil
}

// Grad returns ∂ℓ/∂θ for one example x (1×D or 1×C×H×W) with one-hot label y (1×K), one
// float64 slice per parameter in Params order.
func (o *GradOracle) Grad(x, y *tensor.Dense) ([][]float64, error) {
	if err := o.net.Run(x, y); err != nil {
		return nil, err
	}
	out := make([][]float64, len(o.net.params.List))
	for k, g := range o.net.paramGrads {
		i := o.net.paramIdx[k]
		switch d := g.Data().(type) {
		case []float64:
			out[i] = append([]float64(nil), d...)
		case []float32:
			out[i] = make([]float64, len(d))
			for j, v := range d {
				out[i][j] = float64(v)
			}
		}
	}
	return out, nil
}
