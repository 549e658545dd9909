package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/model"
	"github.com/spf13/pflag"
)

// evalJSON is what dpsgd eval prints. Keys are a contract (TestEvalSavedModel); add, never
// rename.
type evalJSON struct {
	Model    string  `json:"model"`
	Dataset  string  `json:"dataset"`
	Split    string  `json:"split"` // "test"
	N        int     `json:"n"`
	Classes  int     `json:"classes"`
	Accuracy float64 `json:"accuracy"`
	MeanLoss float64 `json:"mean_loss"` // mean softmax cross-entropy, nats
	// ConfusionMatrix[i][j] counts the test examples of label i predicted as class j.
	ConfusionMatrix [][]int `json:"confusion_matrix"`
	Epsilon         float64 `json:"epsilon"` // the model's guarantee (ε, δ), from the file
	Delta           float64 `json:"delta"`
	Guarantee       string  `json:"guarantee"`
}

// loadModel reads the --model file; a file that is not a valid model is a usage error naming
// the problem.
func loadModel(path string) (*model.Artifact, error) {
	if path == "" {
		return nil, usagef("--model: want the file dpsgd train --save wrote")
	}
	a, err := model.ReadFile(path)
	if err != nil {
		return nil, usagef("--model: %v", err)
	}
	return a, nil
}

// evalFlags are dpsgd eval's flags.
type evalFlags struct {
	model, dataset, dataDir, cacheDir string
	set                               map[string]bool
}

func parseEvalFlags(args []string, stdout io.Writer) (*evalFlags, error) {
	f := &evalFlags{}
	fs := newFlagSet("dpsgd eval")
	fs.StringVar(&f.model, "model", "", "the model file (dpsgd train --save)")
	fs.StringVar(&f.dataset, "dataset", "", "synthetic, mnist or adult: the dataset whose test set to evaluate on (default: the model's)")
	fs.StringVar(&f.dataDir, "data-dir", "", "directory holding the dataset files (MNIST IDX or Adult CSV); empty: download into --cache-dir")
	fs.StringVar(&f.cacheDir, "cache-dir", "", "download cache (default: the user cache directory/dpsgd)")
	var err error
	f.set, err = parseFlags(fs, args, stdout, "Usage: dpsgd eval --model FILE [flags]\n\n"+
		"Evaluates a saved model on the test set of its dataset and prints one JSON object: accuracy, mean loss and\n"+
		"the confusion matrix (rows: label, columns: predicted class). They are computed from the test set without\n"+
		"noise: the model's guarantee covers its training data, not these numbers (docs/model-files.md).")
	return f, err
}

func cmdEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseEvalFlags(args, stdout)
	if errors.Is(err, pflag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	a, err := loadModel(f.model)
	if err != nil {
		return err
	}
	name := a.Preprocessing.Dataset
	switch {
	case name == "":
		return usagef("--model %s: its preprocessing is a CSV schema; dpsgd eval evaluates on the built-in datasets (synthetic, mnist, adult)", f.model)
	case f.set["dataset"] && f.dataset != name:
		return usagef("--dataset %q: the model was trained on %s data (its preprocessing); want %s", f.dataset, name, name)
	}
	if _, err := builtinInput(name, a.Arch); err != nil {
		return usagef("--model %s: %v", f.model, err)
	}
	_, test, err := loadData(ctx, name, f.dataDir, f.cacheDir, 0)
	if err != nil {
		return err
	}
	ev, err := engine.Evaluate(a.Arch, a.Params, test, 0)
	if err != nil {
		return err
	}
	if math.IsNaN(ev.MeanLoss) || math.IsInf(ev.MeanLoss, 0) {
		return fmt.Errorf("the mean loss on %s is %v: a logit is not finite", test.Name, ev.MeanLoss)
	}
	return printJSON(stdout, evalJSON{
		Model: f.model, Dataset: name, Split: "test", N: ev.N, Classes: a.Arch.Classes,
		Accuracy: ev.Accuracy, MeanLoss: ev.MeanLoss, ConfusionMatrix: ev.Confusion,
		Epsilon: a.Guarantee.Epsilon, Delta: a.Guarantee.Delta, Guarantee: a.Guarantee.Statement,
	})
}
