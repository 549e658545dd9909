package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/spf13/pflag"
)

// The model presets --model names; any other value is a model file (docs/models.md).
var modelPresets = []string{"logreg", "mlp", "cnn"}

func isPreset(model string) bool {
	for _, p := range modelPresets {
		if model == p {
			return true
		}
	}
	return false
}

// presetModel is the preset whose training defaults a run of model on dataset takes: the model
// itself, or for a model file the dataset's default model.
func presetModel(dataset, model string) string {
	if isPreset(model) {
		return model
	}
	return defaultModel(dataset)
}

func (f *trainFlags) presetModel() string { return presetModel(f.dataset, f.model) }

// readModelFile reads --model FILE when --model names no preset (before the data is loaded, so
// that a wrong path fails at once); --hidden and --activation shape the presets only.
func (f *trainFlags) readModelFile() error {
	if isPreset(f.model) {
		return nil
	}
	data, err := readModelDescription(f.model)
	if err != nil {
		return err
	}
	for _, fl := range []string{"hidden", "activation"} {
		if f.set[fl] {
			return usagef("--%s shapes the presets only; the model file %s describes every layer", fl, f.model)
		}
	}
	f.modelFile = data
	return nil
}

// readModelDescription reads a model file named by --model, with usage errors.
func readModelDescription(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, usagef("--model %q: want logreg, mlp, cnn or a model file (docs/models.md); no such file", path)
	}
	if err != nil {
		return nil, usagef("--model %s: %v", path, err)
	}
	if !st.Mode().IsRegular() || st.Size() > nn.MaxModelFileBytes {
		return nil, usagef("--model %s: want a regular file of at most %d bytes", path, nn.MaxModelFileBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--model %s: %v", path, err)
	}
	return data, nil
}

// arch is the run's architecture: a preset for the data, or the model file's stack on the
// data's shape and classes.
func (f *trainFlags) arch(train *datasets.Dataset, hidden []int, act nn.Activation) (nn.Arch, error) {
	if f.modelFile == nil {
		return newArch(f.model, f.dataset, train, hidden, act)
	}
	a, err := nn.ParseModelFile(f.modelFile, train.Shape, train.Classes)
	if err != nil {
		return nn.Arch{}, usagef("--model %s: %v", f.model, err)
	}
	return a, nil
}

// stackString names a stack's layers with their sizes, as the start-up line shows them.
func stackString(specs []nn.LayerSpec) string {
	parts := make([]string, 0, len(specs))
	for _, s := range specs {
		p := s.Type
		switch s.Type {
		case "dense":
			p += strconv.Itoa(s.Units)
		case "conv2d":
			p += strconv.Itoa(s.Filters)
		case "residual":
			p = "residual(" + stackString(s.Body) + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "-")
}

// modelRow is one preset of dpsgd models.
type modelRow struct {
	Dataset string `json:"dataset"`
	Model   string `json:"model"`
	Arch    string `json:"arch"`
	Params  int    `json:"params"`
	Default bool   `json:"default"`
}

// builtinShapes are the built-in datasets' example shapes and classes (package datasets).
func builtinShapes() []struct {
	name    string
	shape   []int
	classes int
} {
	syn := datasets.DefaultSynthetic()
	return []struct {
		name    string
		shape   []int
		classes int
	}{
		{"mnist", []int{1, 28, 28}, 10},
		{"adult", []int{datasets.AdultDim}, 2},
		{"synthetic", []int{syn.Features}, syn.Classes},
	}
}

// cmdModels lists the presets, per built-in dataset, with their parameter counts, and the layer
// kinds a model file may use.
func cmdModels(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fl := pflag.NewFlagSet("models", pflag.ContinueOnError)
	fl.SetOutput(io.Discard)
	jsonOut := fl.Bool("json", false, "one JSON object: the presets and the layer kinds")
	if _, err := parseFlagsHelp(fl, args, stdout, "Usage: dpsgd models [--json]\n\nThe model presets of --model per built-in dataset with their parameter counts, and the layer kinds of model files (docs/models.md).", nil); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return usagef("unexpected argument %q (dpsgd models takes only --json)", fl.Arg(0))
	}
	var rows []modelRow
	for _, d := range builtinShapes() {
		for _, m := range modelPresets {
			if m == "cnn" && len(d.shape) != 3 {
				continue
			}
			p := presetFor(d.name, m)
			act := nn.Activation(p.activation)
			a, err := newArch(m, d.name, &datasets.Dataset{Shape: d.shape, Classes: d.classes}, p.hidden, act)
			if err != nil {
				return err
			}
			rows = append(rows, modelRow{Dataset: d.name, Model: m, Arch: archString(a), Params: a.NumParams(), Default: m == defaultModel(d.name)})
		}
	}
	kinds := nn.LayerKinds()
	if *jsonOut {
		return json.NewEncoder(stdout).Encode(struct {
			Presets    []modelRow        `json:"presets"`
			LayerKinds map[string]string `json:"layer_kinds"`
		}{rows, kinds})
	}
	fmt.Fprintf(stdout, "%-10s %-7s %9s  %s\n", "dataset", "model", "params", "layers (input-outputs)")
	for _, r := range rows {
		def := ""
		if r.Default {
			def = "  (default)"
		}
		fmt.Fprintf(stdout, "%-10s %-7s %9d  %s%s\n", r.Dataset, r.Model, r.Params, r.Arch, def)
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Fprintln(stdout, "\nModel files (--model FILE, docs/models.md) stack these layers:")
	for _, k := range names {
		takes := kinds[k]
		if takes == "" {
			takes = "-"
		}
		fmt.Fprintf(stdout, "  %-17s %s\n", k, takes)
	}
	fmt.Fprintln(stdout, "  batchnorm         refused: it mixes the examples of a batch; use groupnorm")
	return nil
}
