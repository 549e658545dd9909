package engine

import (
	"fmt"
	"math"
	"strings"

	"github.com/dpsgd/dpsgd/kernels"
)

// Optimizer names of OptimizerConfig.Name; optimizerTable describes each.
const (
	OptimizerSGD      = "sgd"      // plain SGD
	OptimizerMomentum = "momentum" // SGD with heavy-ball momentum
	OptimizerAdam     = "adam"     // Adam (Kingma and Ba 2015)
)

// OptimizerConfig chooses how the noisy gradient updates the parameters. Optimizers run on
// the privatized gradient only, so they are post-processing and cost no privacy.
type OptimizerConfig struct {
	Name        string  // OptimizerSGD, OptimizerMomentum or OptimizerAdam
	LR          float64 // peak learning rate
	Momentum    float64 // heavy-ball coefficient for "momentum" (PyTorch convention: v ← μv + g)
	Beta1       float64 // Adam
	Beta2       float64 // Adam
	Eps         float64 // Adam
	WeightDecay float64 // L2 coefficient added to the gradient (a function of the public weights)
	Schedule    string  // "constant" or "cosine" (from LR to 0 over the planned steps)
	EMA         float64 // if > 0, evaluate an exponential moving average of the weights with this decay
}

// optimizerKind is the table's entry for one optimizer: how many state tensors per parameter
// it keeps, its hyperparameters' defaults and ranges, and its per-step scalars. The update
// itself is elementwise (update), applied by each backend: the CPU's loop (applyUpdate) and
// the CUDA kernels (cudaBackend.apply) run the same formulas.
type optimizerKind struct {
	name string
	// moments is the number of state tensors kept per parameter: 0 (SGD), 1 (the momentum
	// buffer, or Adam's first moment) or 2 (Adam's second moment too).
	moments int
	// DefaultLR is the learning rate a command uses when none is given for a preset tuned
	// with SGD and momentum at learning rate lr (OptimizerDefaultLR).
	defaultLR func(presetLR float64) float64
	// check fills the hyperparameters' defaults and checks their ranges.
	check func(o *OptimizerConfig) error
	// update returns step t's elementwise rule at learning rate lr (t counts from 1).
	update func(o *OptimizerConfig, t int, lr float64) update
}

// optimizerTable lists the optimizers; Validate and the backends look names up here.
var optimizerTable = []optimizerKind{
	{
		name: OptimizerSGD, moments: 0,
		defaultLR: func(lr float64) float64 { return lr },
		check:     func(*OptimizerConfig) error { return nil },
		update: func(o *OptimizerConfig, _ int, lr float64) update {
			return update{kind: updateSGD, lr: lr, wd: o.WeightDecay}
		},
	},
	{
		name: OptimizerMomentum, moments: 1,
		defaultLR: func(lr float64) float64 { return lr },
		check: func(o *OptimizerConfig) error {
			if !(o.Momentum >= 0 && o.Momentum < 1) {
				return fmt.Errorf("momentum %v: want a value in [0, 1)", o.Momentum)
			}
			return nil
		},
		update: func(o *OptimizerConfig, _ int, lr float64) update {
			return update{kind: updateMomentum, lr: lr, wd: o.WeightDecay, mu: o.Momentum}
		},
	},
	{
		name: OptimizerAdam, moments: 2,
		// Adam's step is about lr per coordinate whatever the gradient's scale, so SGD's rates
		// (0.1–1 on these models) diverge; 1e-3 is Kingma and Ba's default and what DP
		// training with Adam commonly starts from.
		defaultLR: func(float64) float64 { return 1e-3 },
		check: func(o *OptimizerConfig) error {
			if o.Beta1 == 0 && o.Beta2 == 0 && o.Eps == 0 {
				o.Beta1, o.Beta2, o.Eps = 0.9, 0.999, 1e-8
			}
			if !(o.Beta1 >= 0 && o.Beta1 < 1) || !(o.Beta2 >= 0 && o.Beta2 < 1) || !(o.Eps > 0) || math.IsInf(o.Eps, 0) {
				return fmt.Errorf("adam betas (%v, %v) and eps %v: want betas in [0, 1) and a finite eps > 0", o.Beta1, o.Beta2, o.Eps)
			}
			return nil
		},
		update: func(o *OptimizerConfig, t int, lr float64) update {
			c1 := 1 - math.Pow(o.Beta1, float64(t))
			c2 := 1 - math.Pow(o.Beta2, float64(t))
			return update{kind: updateAdam, lr: lr * math.Sqrt(c2) / c1, wd: o.WeightDecay, beta1: o.Beta1, beta2: o.Beta2, eps: o.Eps}
		},
	},
}

// optimizerByName returns the table's entry for name.
func optimizerByName(name string) (optimizerKind, bool) {
	for _, k := range optimizerTable {
		if k.name == name {
			return k, true
		}
	}
	return optimizerKind{}, false
}

// OptimizerNames lists the optimizers, in the table's order.
func OptimizerNames() []string {
	out := make([]string, len(optimizerTable))
	for i, k := range optimizerTable {
		out[i] = k.name
	}
	return out
}

// OptimizerDefaultLR is the learning rate a command should use for the optimizer name when the
// user gives none and the model's preset was tuned at presetLR with SGD or momentum. It
// returns presetLR for an unknown name (Validate reports that name).
func OptimizerDefaultLR(name string, presetLR float64) float64 {
	if k, ok := optimizerByName(strings.ToLower(name)); ok {
		return k.defaultLR(presetLR)
	}
	return presetLR
}

// Validate checks every field against its valid range.
func (o *OptimizerConfig) Validate() error {
	o.Name = strings.ToLower(o.Name)
	k, ok := optimizerByName(o.Name)
	if !ok {
		names := OptimizerNames()
		return fmt.Errorf("optimizer %q: want %s or %s", o.Name, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
	}
	if !(o.LR > 0) || math.IsInf(o.LR, 0) {
		return fmt.Errorf("learning rate %v: want a finite value > 0", o.LR)
	}
	if err := k.check(o); err != nil {
		return err
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

// updateKind is the elementwise rule of an update.
type updateKind int

const (
	updateSGD      updateKind = iota // w ← w − lr·(g + wd·w)
	updateMomentum                   // m ← μ·m + g + wd·w; w ← w − lr·m
	updateAdam                       // g′ = g + wd·w; m ← β₁m + (1−β₁)g′; v ← β₂v + (1−β₂)g′²; w ← w − lr·m/(√v + eps)
)

// update is one optimizer step as the backends apply it, elementwise over every parameter:
// the rule and its scalars for this step (for Adam, lr is the bias-corrected step size).
type update struct {
	kind              updateKind
	lr, wd, mu        float64
	beta1, beta2, eps float64
}

// optimizer is an optimizer's state on the host: per parameter tensor, the moments its kind
// keeps (m: momentum or Adam's first moment; v: Adam's second), and the steps taken (Adam's
// bias-correction count). On the CPU the updates run on it (applyUpdate); on the device it is
// a mirror, brought up to date for a checkpoint.
type optimizer[T kernels.Float] struct {
	cfg  OptimizerConfig
	kind optimizerKind
	m, v [][]T
	t    int
}

func newOptimizer[T kernels.Float](cfg OptimizerConfig, sizes []int) *optimizer[T] {
	k, ok := optimizerByName(cfg.Name)
	if !ok {
		panic(fmt.Sprintf("engine: optimizer %q not validated", cfg.Name))
	}
	o := &optimizer[T]{cfg: cfg, kind: k}
	if k.moments >= 1 {
		for _, n := range sizes {
			o.m = append(o.m, make([]T, n))
		}
	}
	if k.moments >= 2 {
		for _, n := range sizes {
			o.v = append(o.v, make([]T, n))
		}
	}
	return o
}

// applyUpdate applies u to params with gradients g (already noisy and normalized) and the
// moments m, v, in T's arithmetic: the CPU backend's update.
func applyUpdate[T kernels.Float](u update, params, g, m, v [][]T) {
	wd := T(u.wd)
	switch u.kind {
	case updateSGD:
		for p, w := range params {
			gp := g[p]
			for j := range w {
				w[j] -= T(u.lr) * (gp[j] + wd*w[j])
			}
		}
	case updateMomentum:
		mu := T(u.mu)
		for p, w := range params {
			gp, mp := g[p], m[p]
			for j := range w {
				mp[j] = mu*mp[j] + gp[j] + wd*w[j]
				w[j] -= T(u.lr) * mp[j]
			}
		}
	case updateAdam:
		b1, b2 := u.beta1, u.beta2
		for p, w := range params {
			gp, mp, vp := g[p], m[p], v[p]
			for j := range w {
				gj := gp[j] + wd*w[j]
				mp[j] = T(b1)*mp[j] + T(1-b1)*gj
				vp[j] = T(b2)*vp[j] + T(1-b2)*gj*gj
				w[j] -= T(u.lr) * mp[j] / (T(math.Sqrt(float64(vp[j]))) + T(u.eps))
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
