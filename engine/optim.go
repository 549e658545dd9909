package engine

import (
	"fmt"
	"math"
	"strings"

	"github.com/dpsgd/dpsgd/kernels"
)

// OptimizerConfig chooses how the noisy gradient updates the parameters. Optimizers run on
// the privatized gradient only, so they are post-processing and cost no privacy.
type OptimizerConfig struct {
	Name        string  // "sgd", "momentum" or "adam"
	LR          float64 // peak learning rate
	Momentum    float64 // heavy-ball coefficient for "momentum" (PyTorch convention: v ← μv + g)
	Beta1       float64 // Adam
	Beta2       float64 // Adam
	Eps         float64 // Adam
	WeightDecay float64 // L2 coefficient added to the gradient (a function of the public weights)
	Schedule    string  // "constant" or "cosine" (from LR to 0 over the planned steps)
	EMA         float64 // if > 0, evaluate an exponential moving average of the weights with this decay
}

// Validate checks every field against its valid range.
func (o *OptimizerConfig) Validate() error {
	o.Name = strings.ToLower(o.Name)
	switch o.Name {
	case "sgd", "momentum", "adam":
	default:
		return fmt.Errorf("optimizer %q: want sgd, momentum or adam", o.Name)
	}
	if !(o.LR > 0) || math.IsInf(o.LR, 0) {
		return fmt.Errorf("learning rate %v: want a finite value > 0", o.LR)
	}
	if o.Name == "momentum" && !(o.Momentum >= 0 && o.Momentum < 1) {
		return fmt.Errorf("momentum %v: want a value in [0, 1)", o.Momentum)
	}
	if o.Name == "adam" {
		if o.Beta1 == 0 && o.Beta2 == 0 && o.Eps == 0 {
			o.Beta1, o.Beta2, o.Eps = 0.9, 0.999, 1e-8
		}
		if !(o.Beta1 >= 0 && o.Beta1 < 1) || !(o.Beta2 >= 0 && o.Beta2 < 1) || !(o.Eps > 0) {
			return fmt.Errorf("adam betas (%v, %v) and eps %v: want betas in [0, 1) and eps > 0", o.Beta1, o.Beta2, o.Eps)
		}
	}
	if !(o.WeightDecay >= 0) || math.IsInf(o.WeightDecay, 0) {
		return fmt.Errorf("weight decay %v: want a finite value ≥ 0", o.WeightDecay)
	}
	switch o.Schedule {
	case "":
		o.Schedule = "constant"
	case "constant", "cosine":
	default:
		return fmt.Errorf("schedule %q: want constant or cosine", o.Schedule)
	}
	if !(o.EMA >= 0 && o.EMA < 1) {
		return fmt.Errorf("ema %v: want a value in [0, 1)", o.EMA)
	}
	return nil
}

// rate is the learning rate at step t of total.
func (o *OptimizerConfig) rate(t, total int) float64 {
	if o.Schedule == "cosine" && total > 0 {
		return o.LR * 0.5 * (1 + math.Cos(math.Pi*float64(min(t, total))/float64(total)))
	}
	return o.LR
}

// optimizer applies updates in place; its state is per parameter tensor.
type optimizer[T kernels.Float] struct {
	cfg  OptimizerConfig
	m, v [][]T
	t    int
}

func newOptimizer[T kernels.Float](cfg OptimizerConfig, sizes []int) *optimizer[T] {
	o := &optimizer[T]{cfg: cfg}
	if cfg.Name != "sgd" {
		for _, n := range sizes {
			o.m = append(o.m, make([]T, n))
		}
	}
	if cfg.Name == "adam" {
		for _, n := range sizes {
			o.v = append(o.v, make([]T, n))
		}
	}
	return o
}

// step updates params with gradients g (already noisy and normalized) at learning rate lr.
func (o *optimizer[T]) step(params, g [][]T, lr float64) {
	o.t++
	wd := T(o.cfg.WeightDecay)
	switch o.cfg.Name {
	case "sgd":
		for p, w := range params {
			gp := g[p]
			for j := range w {
				w[j] -= T(lr) * (gp[j] + wd*w[j])
			}
		}
	case "momentum":
		mu := T(o.cfg.Momentum)
		for p, w := range params {
			gp, m := g[p], o.m[p]
			for j := range w {
				m[j] = mu*m[j] + gp[j] + wd*w[j]
				w[j] -= T(lr) * m[j]
			}
		}
	case "adam":
		b1, b2 := o.cfg.Beta1, o.cfg.Beta2
		c1 := 1 - math.Pow(b1, float64(o.t))
		c2 := 1 - math.Pow(b2, float64(o.t))
		step := lr * math.Sqrt(c2) / c1
		for p, w := range params {
			gp, m, v := g[p], o.m[p], o.v[p]
			for j := range w {
				gj := gp[j] + wd*w[j]
				m[j] = T(b1)*m[j] + T(1-b1)*gj
				v[j] = T(b2)*v[j] + T(1-b2)*gj*gj
				w[j] -= T(step) * m[j] / (T(math.Sqrt(float64(v[j]))) + T(o.cfg.Eps))
			}
		}
	}
}

// emaUpdate sets avg ← β·avg + (1−β)·w.
func emaUpdate[T kernels.Float](avg, w [][]T, beta float64) {
	b := T(beta)
	for p, a := range avg {
		wp := w[p]
		for j := range a {
			a[j] = b*a[j] + (1-b)*wp[j]
		}
	}
}
