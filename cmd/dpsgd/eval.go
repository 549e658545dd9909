package main

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/model"
)

// evalJSON is what dpsgd eval prints. Keys are a contract (TestEvalSavedModel); add, never
// rename.
type evalJSON struct {
	Model   string `json:"model"`
	Dataset string `json:"dataset"`
	// Data is the file evaluated on (--data) for a model of the user's own data.
	Data     string  `json:"data,omitempty"`
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
	download                          bool   // --download: fetch CIFAR-10 (cifar.go)
	data, labels                      string // a model of the user's own data: its labelled test file
	set                               map[string]bool
}

func parseEvalFlags(args []string, stdout io.Writer) (*evalFlags, error) {
	f := &evalFlags{}
	fs := newFlagSet("dpsgd eval")
	fs.StringVar(&f.model, "model", "", "the model file (dpsgd train --save)")
	fs.StringVar(&f.dataset, "dataset", "", "synthetic, mnist, adult or cifar10: the dataset whose test set to evaluate on (default: the model's)")
	addDataDirFlags(fs, &f.dataDir, &f.cacheDir, dataDirCIFARUsage)
	addDownloadFlag(fs, &f.download)
	fs.StringVar(&f.data, "data", "", "a model of your own data (csv or idx): the labelled test file, read with the model's schema (a CSV with its label column, or IDX images with --labels)")
	fs.StringVar(&f.labels, "labels", "", "a model of idx data: the IDX labels file of --data")
	var err error
	f.set, err = parseFlags(fs, args, stdout, "Usage: dpsgd eval --model FILE [flags]\n"+
		"       dpsgd eval --model FILE --data TEST.csv\n"+
		"       dpsgd eval --model FILE --data IMAGES --labels LABELS\n\n"+
		"Evaluates a saved model on the test set of its dataset, or on your labelled file for a model of your own\n"+
		"data, and prints one JSON object: accuracy, mean loss and the confusion matrix (rows: label, columns:\n"+
		"predicted class). They are computed from the test set without noise: the model's guarantee covers its\n"+
		"training data, not these numbers (docs/model-files.md).")
	return f, err
}

// ownTest loads the --data test file of a model trained on the user's own data, encoded with
// the schema the model stores, and checks that it fits the model.
func (f *evalFlags) ownTest(a *model.Artifact) (*datasets.Dataset, error) {
	kind := a.Preprocessing.Dataset
	for _, name := range []string{"dataset", "data-dir", "cache-dir", "download"} {
		if f.set[name] && !(name == "dataset" && f.dataset == kind) {
			return nil, usagef("--%s: the model was trained on your own %s data; evaluate it on a labelled file: --data FILE", name, kind)
		}
	}
	switch {
	case f.data == "" && kind == model.DatasetIDX:
		return nil, usagef("--data and --labels: want the IDX images and labels to evaluate the model on")
	case f.data == "":
		return nil, usagef("--data: want the labelled CSV to evaluate the model on (with its label column)")
	case kind == model.DatasetIDX && f.labels == "":
		return nil, usagef("--labels: want the IDX labels file of --data %s", quoteArg(f.data))
	case kind == model.DatasetCSV && f.set["labels"]:
		return nil, usagef("--labels: for a model of idx data; a CSV's labels are its label column")
	}
	s, err := ownSchema(a.Preprocessing, a.Arch)
	if err != nil {
		return nil, usagef("--model %s: %v", f.model, err)
	}
	var test *datasets.Dataset
	if kind == model.DatasetCSV {
		test, err = datasets.LoadCSV(f.data, s)
	} else {
		test, err = datasets.LoadIDX(f.data, f.labels, s)
	}
	if err != nil {
		return nil, usagef("--data: %v", err)
	}
	if !inputFits(test.Shape, a.Arch) {
		return nil, usagef("--data %s: examples of shape %v; the model takes inputs of shape %v (%d features)", quoteArg(f.data), test.Shape, a.Arch.Input, a.Arch.InputSize())
	}
	return test, nil
}

func cmdEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseEvalFlags(args, stdout)
	if err != nil {
		return err // pflag.ErrHelp after --help: report exits 0
	}
	a, err := loadModel(f.model)
	if err != nil {
		return err
	}
	name := a.Preprocessing.Dataset
	var test *datasets.Dataset
	if name == model.DatasetCSV || name == model.DatasetIDX {
		if test, err = f.ownTest(a); err != nil {
			return err
		}
	} else {
		switch {
		case f.set["dataset"] && f.dataset != name:
			return usagef("--dataset %q: the model was trained on %s data (its preprocessing); want %s", f.dataset, name, name)
		case f.set["data"] || f.set["labels"]:
			return usagef("--data and --labels are for models of your own data (csv or idx); a model of %s is evaluated on its test set (--data-dir)", name)
		}
		if _, err := builtinInput(name, a.Arch); err != nil {
			return usagef("--model %s: %v", f.model, err)
		}
		if err := checkDownload(f.set["download"], name); err != nil {
			return err
		}
		if name == "cifar10" {
			_, test, err = loadCIFAR10(ctx, f.dataDir, f.cacheDir, f.download)
		} else {
			_, test, err = loadData(ctx, name, f.dataDir, f.cacheDir, 0)
		}
		if err != nil {
			return err
		}
	}
	ev, err := engine.Evaluate(a.Arch, a.Params, test, 0)
	if err != nil {
		return err
	}
	if math.IsNaN(ev.MeanLoss) || math.IsInf(ev.MeanLoss, 0) {
		return fmt.Errorf("the mean loss on %s is %v: a logit is not finite", test.Name, ev.MeanLoss)
	}
	return printJSON(stdout, evalJSON{
		Model: f.model, Dataset: name, Data: f.data, Split: "test", N: ev.N, Classes: a.Arch.Classes,
		Accuracy: ev.Accuracy, MeanLoss: ev.MeanLoss, ConfusionMatrix: ev.Confusion,
		Epsilon: a.Guarantee.Epsilon, Delta: a.Guarantee.Delta, Guarantee: a.Guarantee.Statement,
	})
}
