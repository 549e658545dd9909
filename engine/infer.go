package engine

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/kernels"
	"gorgonia.org/tensor"
)

// DefaultEvalBatch is the rows of the evaluation graphs when Config.EvalBatch is 0, and of
// Predict and Evaluate when their batch is 0.
const DefaultEvalBatch = 500

// Inference on saved parameters. Predict and Evaluate run the same evaluation graphs as Train's
// per-epoch evaluation (eval.go), at the same batch by default, and count a prediction as Train
// does (Argmax: the first maximum of the logits in the parameters' dtype), so Evaluate's
// accuracy of the parameters a run ended with (Result.Model) is the run's test accuracy.

// Argmax returns the predicted class of one row of logits: the index of its first maximum, as
// Train's accuracy counts it.
func Argmax[T kernels.Float](z []T) int { return argmax(z) }

// Predict returns the logits of the rows of x (row-major, arch.InputSize() float32 features per
// row, as datasets hold them) under params: one row of arch.Classes values per input row, in
// float64 (exact for float32 parameters). batch is the evaluation graphs' batch (0:
// DefaultEvalBatch); batches run in parallel over GOMAXPROCS graphs.
func Predict(arch nn.Arch, params *nn.Params, x []float32, batch int) ([]float64, error) {
	d := arch.InputSize()
	if err := arch.Validate(); err != nil {
		return nil, fmt.Errorf("engine: predict: %w", err)
	}
	if len(x)%d != 0 {
		return nil, fmt.Errorf("engine: predict: %d feature values, not a multiple of the model's %d features per row", len(x), d)
	}
	if batch == 0 {
		batch = DefaultEvalBatch
	}
	if batch < 1 {
		return nil, fmt.Errorf("engine: predict: batch %d: want ≥ 1", batch)
	}
	if params == nil {
		return nil, fmt.Errorf("engine: predict: no parameters")
	}
	if params.Dtype == tensor.Float64 {
		return predictT[float64](arch, params, x, d, batch)
	}
	return predictT[float32](arch, params, x, d, batch)
}

func predictT[T kernels.Float](arch nn.Arch, params *nn.Params, x []float32, d, batch int) ([]float64, error) {
	n, k := len(x)/d, arch.Classes
	out := make([]float64, n*k)
	nb := (n + batch - 1) / batch
	workers := min(runtime.GOMAXPROCS(0), nb)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		ev, err := newEvaluator[T](arch, params, batch)
		if err != nil {
			return nil, fmt.Errorf("engine: predict: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ev.net.Close()
			for j := w; j < nb; j += workers {
				lo, hi := j*batch, min((j+1)*batch, n)
				logits, err := ev.forward(x, d, lo, hi)
				if err != nil {
					errs[w] = err
					return
				}
				for i, v := range logits {
					out[lo*k+i] = float64(v)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("engine: predict: %w", err)
		}
	}
	return out, nil
}

// Evaluation is a model's score on a labelled dataset.
type Evaluation struct {
	N        int     // examples
	Accuracy float64 // fraction whose predicted class (Argmax) is the label
	// MeanLoss is the mean softmax cross-entropy in nats (nn.CrossEntropy); not finite when a
	// logit is not.
	MeanLoss float64
	// Confusion[i][j] counts the examples of label i predicted as class j; it sums to N.
	Confusion [][]int
}

// Evaluate runs the model (arch, params) on every example of ds (Predict, at batch) and
// returns its accuracy, mean loss and confusion matrix.
func Evaluate(arch nn.Arch, params *nn.Params, ds *datasets.Dataset, batch int) (*Evaluation, error) {
	if ds == nil || ds.N == 0 {
		return nil, fmt.Errorf("engine: evaluate: no examples")
	}
	if ds.D != arch.InputSize() || ds.Classes != arch.Classes || len(ds.X) != ds.N*ds.D || len(ds.Y) != ds.N {
		return nil, fmt.Errorf("engine: evaluate: dataset %s has %d examples of %d features and %d classes, the model wants %d features and %d classes",
			ds.Name, ds.N, ds.D, ds.Classes, arch.InputSize(), arch.Classes)
	}
	logits, err := Predict(arch, params, ds.X, batch)
	if err != nil {
		return nil, err
	}
	k := arch.Classes
	ev := &Evaluation{N: ds.N, Confusion: make([][]int, k)}
	for i := range ev.Confusion {
		ev.Confusion[i] = make([]int, k)
	}
	correct, loss := 0, 0.0
	for i, y := range ds.Y {
		if y < 0 || y >= k {
			return nil, fmt.Errorf("engine: evaluate: example %d has label %d, want one in [0, %d)", i, y, k)
		}
		z := logits[i*k : (i+1)*k]
		c := argmax(z)
		ev.Confusion[y][c]++
		if c == y {
			correct++
		}
		loss += nn.CrossEntropy(z, y)
	}
	ev.Accuracy = float64(correct) / float64(ds.N)
	ev.MeanLoss = loss / float64(ds.N)
	return ev, nil
}

// released returns a copy of the parameters the run evaluates with (the moving average with
// Optimizer.EMA, else the parameters), or nil when they are not finite: Result.Model.
func (r *run[T]) released() *nn.Params {
	p := r.params
	if r.ema != nil {
		p = r.ema
	}
	if !finite(paramSlices[T](p)) {
		return nil
	}
	return p.Clone()
}
