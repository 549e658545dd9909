// Command own_data trains a differentially private model on the user's own CSV data through
// the front door (package dpsgd), with the preprocessing given by a public schema, and writes
// the release: the model file (architecture, parameters, schema, guarantee; nothing private)
// and its weights in safetensors for PyTorch. It is `dpsgd train --data … --schema … --save …`
// written as a short Go program, for users who embed dpsgd.
//
//	go run ./examples/own_data --train train.csv --test test.csv --schema schema.json --out model.dpsgd
//
// The schema must be public (docs/datasets.md: bounds and categories chosen without looking
// at the data; `dpsgd schema` drafts one to review).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/dpsgd/dpsgd"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/model"
	"github.com/spf13/pflag"
)

// errUsage marks a usage error (exit 2).
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "own_data:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "own_data:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("own_data", pflag.ContinueOnError)
	trainPath := fs.String("train", "", "training CSV (header; the schema's columns)")
	testPath := fs.String("test", "", "test CSV, same columns")
	schemaPath := fs.String("schema", "", "the public schema (JSON, docs/datasets.md)")
	out := fs.String("out", "model.dpsgd", "the model file to write (and OUT.safetensors)")
	eps := fs.Float64("epsilon", 3, "target ε")
	delta := fs.Float64("delta", 1e-5, "δ")
	epochs := fs.Int("epochs", 10, "epochs")
	batch := fs.Int("batch-size", 64, "expected batch size (Poisson sampling)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *trainPath == "" || *testPath == "" || *schemaPath == "" {
		return fmt.Errorf("%w: --train, --test and --schema are required", errUsage)
	}
	schemaJSON, err := os.ReadFile(*schemaPath)
	if err != nil {
		return err
	}
	schema, err := datasets.ParseSchema(schemaJSON)
	if err != nil {
		return fmt.Errorf("%w: --schema: %w", errUsage, err)
	}
	train, err := datasets.LoadCSV(*trainPath, schema)
	if err != nil {
		return fmt.Errorf("%w: --train: %w", errUsage, err)
	}
	test, err := datasets.LoadCSV(*testPath, schema)
	if err != nil {
		return fmt.Errorf("%w: --test: %w", errUsage, err)
	}

	// The privacy plan, stated once: the front door calibrates σ, owns the ledger and states
	// the guarantee.
	arch := nn.LogReg(train.Shape, train.Classes)
	plan := dpsgd.Plan{Sampler: dpsgd.Poisson, BatchSize: *batch, Epochs: *epochs, Clip: 1,
		TargetEpsilon: *eps, Delta: *delta, Secure: true}
	priv, err := plan.Resolve(ctx, train.N, arch, nil)
	if err != nil {
		var fe *dpsgd.FieldError
		if errors.As(err, &fe) {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		return err
	}
	cfg := engine.Config{Arch: arch, PhysicalBatch: 256, Replicas: 1,
		Optimizer: engine.OptimizerConfig{Name: engine.OptimizerSGD, LR: 0.5}}
	res, err := priv.Train(ctx, cfg, train, test, nil)
	if res == nil {
		return err
	}
	sentence, gerr := priv.Guarantee(res)
	if gerr != nil {
		return errors.Join(err, gerr)
	}
	fmt.Fprintf(stdout, "test accuracy %.4f (not covered by the guarantee)\n%s\n", res.TestAccuracy, sentence)
	if err != nil {
		return err // interrupted or diverged: the guarantee above covers the steps taken
	}

	g, err := priv.Release(res)
	if err != nil {
		return err
	}
	art := &model.Artifact{Arch: arch, Params: res.Model, Guarantee: g,
		Preprocessing: model.Preprocessing{Dataset: model.DatasetCSV, Schema: schemaJSON}}
	if err := model.WriteFile(*out, art); err != nil {
		return err
	}
	st, err := model.EncodeSafetensors(art)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out+".safetensors", st, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %s.safetensors\n", *out, *out)
	return nil
}
