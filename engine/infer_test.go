package engine

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/engine/sampler"
	"gorgonia.org/tensor"
)

// TestEvaluateResultModel: Result.Model is the parameters the run evaluates with — Evaluate
// gives exactly the run's test accuracy, with and without a moving average, in float32 and
// float64; the confusion matrix sums to N by row to each class's count and its diagonal to the
// correct count; the mean loss is the mean of the examples' cross-entropies recomputed from
// Predict's logits (at another batch).
func TestEvaluateResultModel(t *testing.T) {
	train, test := smallProblem(t)
	for _, c := range []struct {
		dt  tensor.Dtype
		ema float64
	}{{tensor.Float32, 0.9}, {tensor.Float32, 0}, {tensor.Float64, 0.9}} {
		cfg := smallConfig(train)
		cfg.Dtype, cfg.Optimizer.EMA, cfg.Epochs = c.dt, c.ema, 2
		smp, err := sampler.NewPoisson(train.N, 100.0/float64(train.N), 3)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Train(context.Background(), cfg, train, test, smp, poissonPrivacy(t, smp.SampleRate(), 1, nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Model == nil || res.Model.Dtype != c.dt {
			t.Fatalf("%v ema %v: Result.Model %v", c.dt, c.ema, res.Model)
		}
		ev, err := Evaluate(cfg.Arch, res.Model, test, 0)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Accuracy != res.TestAccuracy || ev.N != test.N {
			t.Errorf("%v ema %v: Evaluate accuracy %v on %d, the run's test accuracy %v", c.dt, c.ema, ev.Accuracy, ev.N, res.TestAccuracy)
		}
		total, diag := 0, 0
		for i, row := range ev.Confusion {
			n := 0
			for j, v := range row {
				n += v
				if i == j {
					diag += v
				}
			}
			if want := countLabel(test.Y, i); n != want {
				t.Errorf("%v: confusion row %d sums to %d, label %d has %d examples", c.dt, i, n, i, want)
			}
			total += n
		}
		if total != test.N || float64(diag)/float64(test.N) != ev.Accuracy {
			t.Errorf("%v: confusion total %d diagonal %d, N %d accuracy %v", c.dt, total, diag, test.N, ev.Accuracy)
		}
		logits, err := Predict(cfg.Arch, res.Model, test.X, 7)
		if err != nil {
			t.Fatal(err)
		}
		k := cfg.Arch.Classes
		loss, agree := 0.0, 0
		for i := range test.N {
			z := logits[i*k : (i+1)*k]
			m := slices.Max(z)
			s := 0.0
			for _, v := range z {
				s += math.Exp(v - m)
			}
			loss += m + math.Log(s) - z[test.Y[i]]
			if argmaxRef(z) == Argmax(z) {
				agree++
			}
		}
		if math.Abs(loss/float64(test.N)-ev.MeanLoss) > 1e-9*ev.MeanLoss || !(ev.MeanLoss > 0) {
			t.Errorf("%v: mean loss %v, recomputed %v", c.dt, ev.MeanLoss, loss/float64(test.N))
		}
		if agree != test.N {
			t.Errorf("Argmax differs from the first maximum on %d rows", test.N-agree)
		}
	}
}

func countLabel(y []int, c int) int {
	n := 0
	for _, v := range y {
		if v == c {
			n++
		}
	}
	return n
}

// argmaxRef is the first index of the maximum.
func argmaxRef(z []float64) int { return slices.Index(z, slices.Max(z)) }

// TestPredictRefuses: inputs that are not whole rows, no parameters and a bad batch are errors.
func TestPredictRefuses(t *testing.T) {
	arch := nn.LogReg([]int{4}, 3)
	p, err := nn.NewParams(arch, tensor.Float32, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Predict(arch, p, make([]float32, 6), 0); err == nil {
		t.Error("6 values for rows of 4: accepted")
	}
	if _, err := Predict(arch, nil, make([]float32, 8), 0); err == nil {
		t.Error("no parameters: accepted")
	}
	if _, err := Predict(arch, p, make([]float32, 8), -1); err == nil {
		t.Error("batch -1: accepted")
	}
	out, err := Predict(arch, p, make([]float32, 8), 0)
	if err != nil || len(out) != 6 {
		t.Errorf("two rows: %v logits, %v", out, err)
	}
}
