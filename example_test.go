package dpsgd_test

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"strings"

	"github.com/dpsgd/dpsgd"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/nn"
)

// twoClouds returns n points in the plane, half around (-1, -1) with label 0 and half around
// (1, 1) with label 1, each coordinate with standard deviation 1.
func twoClouds(n int, seed uint64) *datasets.Dataset {
	rng := rand.New(rand.NewPCG(seed, 0))
	d := &datasets.Dataset{Name: "two clouds", N: n, D: 2, Classes: 2, Shape: []int{2},
		X: make([]float32, 2*n), Y: make([]int, n)}
	for i := range n {
		y := i % 2
		c := float64(2*y - 1)
		d.X[2*i], d.X[2*i+1] = float32(c+rng.NormFloat64()), float32(c+rng.NormFloat64())
		d.Y[i] = y
	}
	return d
}

// ExamplePrivate_Train trains a logistic regression on 400 points with Poisson sampling, σ
// calibrated so that 10 epochs spend ε = 2 at δ = 1e-5, and states the guarantee.
func ExamplePrivate_Train() {
	train, test := twoClouds(400, 1), twoClouds(200, 2)
	arch := nn.LogReg(train.Shape, train.Classes)

	plan := dpsgd.Plan{
		Sampler: dpsgd.Poisson, BatchSize: 40, Epochs: 10, Clip: 1,
		TargetEpsilon: 2, Delta: 1e-5, Seed: 7,
	}
	ctx := context.Background()
	priv, err := plan.Resolve(ctx, train.N, arch, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("σ %s, accountant %s\n", priv.SigmaSource, priv.Accountant.Name())

	cfg := engine.Config{Arch: arch, PhysicalBatch: 64, Replicas: 1,
		Optimizer: engine.OptimizerConfig{Name: "sgd", LR: 0.5}}
	res, err := priv.Train(ctx, cfg, train, test, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ε = %.1f after %d steps; better than chance: %v\n", res.Epsilon, res.Steps, res.TestAccuracy > 0.75)

	sentence, err := priv.Guarantee(res)
	if err != nil {
		log.Fatal(err)
	}
	_, rest, _ := strings.Cut(sentence, " under ")
	stmt, _, _ := strings.Cut(rest, "; the noise")
	fmt.Println("under", stmt)
	// Output:
	// σ calibrated to ε = 2 over 10 epochs, accountant pld
	// ε = 2.0 after 100 steps; better than chance: true
	// under zero-out adjacency (one record replaced by a ghost whose gradient is zero; the dataset size N = 400 is public), proven for the poisson sampler by the pld accountant
}
