package dpsgd_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"strings"

	"github.com/dpsgd/dpsgd"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/model"
)

// ownCSV writes n rows of a small table: a numeric column x, a categorical column colour and
// the label, which is "yes" mostly when x > 0.
func ownCSV(n int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 0))
	var b strings.Builder
	b.WriteString("x,colour,label\n")
	for range n {
		x := 2 * rng.NormFloat64()
		label := "no"
		if x+0.5*rng.NormFloat64() > 0 {
			label = "yes"
		}
		fmt.Fprintf(&b, "%.3f,%s,%s\n", x, []string{"red", "blue", "green"}[rng.IntN(3)], label)
	}
	return b.String()
}

// The public schema: bounds and categories chosen without looking at the data (the
// colour "green" is not listed and goes to the "other" bucket).
const ownSchema = `{
  "label": {"column": "label", "classes": ["no", "yes"]},
  "columns": [
    {"name": "x", "type": "numeric", "lo": -8, "hi": 8},
    {"name": "colour", "type": "categorical", "categories": ["red", "blue"]}
  ]
}`

// Example_ownData trains privately on a CSV table encoded by a public schema, saves the
// release (model file: architecture, parameters, schema, guarantee — nothing private), reads
// it back and evaluates it on the test table.
func Example_ownData() {
	schema, err := datasets.ParseSchema([]byte(ownSchema))
	if err != nil {
		log.Fatal(err)
	}
	train, err := datasets.ReadCSV(strings.NewReader(ownCSV(600, 1)), "train.csv", schema)
	if err != nil {
		log.Fatal(err)
	}
	test, err := datasets.ReadCSV(strings.NewReader(ownCSV(300, 2)), "test.csv", schema)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("features per row: %d (x; red, blue, other)\n", train.D)

	arch := nn.LogReg(train.Shape, train.Classes)
	plan := dpsgd.Plan{Sampler: dpsgd.Poisson, BatchSize: 60, Epochs: 10, Clip: 1,
		TargetEpsilon: 3, Delta: 1e-5, Seed: 11}
	ctx := context.Background()
	priv, err := plan.Resolve(ctx, train.N, arch, nil)
	if err != nil {
		log.Fatal(err)
	}
	cfg := engine.Config{Arch: arch, PhysicalBatch: 64, Replicas: 1,
		Optimizer: engine.OptimizerConfig{Name: engine.OptimizerSGD, LR: 0.5}}
	res, err := priv.Train(ctx, cfg, train, test, nil)
	if err != nil {
		log.Fatal(err)
	}

	// The release: the guarantee as the model file states it, and the schema that encodes
	// new rows.
	g, err := priv.Release(res)
	if err != nil {
		log.Fatal(err)
	}
	art := &model.Artifact{Arch: arch, Params: res.Model, Guarantee: g,
		Preprocessing: model.Preprocessing{Dataset: model.DatasetCSV, Schema: []byte(ownSchema)}}
	var file bytes.Buffer
	if err := model.Save(&file, art); err != nil {
		log.Fatal(err)
	}
	back, err := model.Load(&file)
	if err != nil {
		log.Fatal(err)
	}
	ev, err := engine.Evaluate(back.Arch, back.Params, test, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("reloaded model on %d test rows: accuracy as in training: %v; better than chance: %v\n",
		ev.N, ev.Accuracy == res.TestAccuracy, ev.Accuracy > 0.7)
	fmt.Printf("ε = %.0f at δ = %g\n", back.Guarantee.Epsilon, back.Guarantee.Delta)
	// Output:
	// features per row: 4 (x; red, blue, other)
	// reloaded model on 300 test rows: accuracy as in training: true; better than chance: true
	// ε = 3 at δ = 1e-05
}
