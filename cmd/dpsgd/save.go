package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/internal/atomicfile"
	"github.com/dpsgd/dpsgd/model"
)

// saveUsage is the help of dpsgd train --save.
const saveUsage = "write the trained model, a public release (architecture, parameters, preprocessing and the guarantee; no seed, " +
	"no training statistics), to FILE when a private run ends, and its weights named for PyTorch's nn.Sequential to FILE.safetensors " +
	"(docs/model-files.md); an interrupted run saves the model of the steps charged"

// safetensorsPath is where --save FILE writes the safetensors weights: FILE.safetensors.
func safetensorsPath(path string) string { return path + ".safetensors" }

// savedJSON is the --json record of the files --save wrote.
type savedJSON struct {
	File        string `json:"file"`
	Safetensors string `json:"safetensors"`
}

// checkSave checks --save before the run: a private run, and paths that can be written (their
// directory exists, they are not directories, not the checkpoint's), so that a long run does not
// end without its model.
func (f *trainFlags) checkSave() error {
	if f.save == "" {
		return nil
	}
	if f.nonPrivate {
		return usagef("--save with --non-private: a non-private run has no guarantee, so its model is not a DP release; save the model of a private run")
	}
	for _, p := range []string{f.save, safetensorsPath(f.save)} {
		if p == f.checkpoint || p == f.resume {
			return usagef("--save %s: the same file as the checkpoint; a checkpoint is private and the model a release, want another path", f.save)
		}
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return usagef("--save %s: %s is a directory, want a file path", f.save, p)
		}
	}
	dir := filepath.Dir(f.save)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return usagef("--save %s: directory %s does not exist", f.save, dir)
	}
	return nil
}

// saveModel writes the --save files at the end of a run and records them in out.
//
// Which runs save: a private run that finished, stopped for the budget, or was interrupted
// (Ctrl-C, SIGTERM) after at least one step — its parameters are a DP release of the steps
// charged, and the file states the ε of those steps, as the run reports it. A run that diverged
// or failed saves nothing (a note on stderr; its error decides the exit status), and so does one
// whose guarantee cannot be released (no step taken, ε infinite at δ): that is an error when the
// run itself succeeded, since the model asked for was not written.
func (f *trainFlags) saveModel(out *trainJSON, rc *runConfig, res *engine.Result, trainErr error, stderr io.Writer) error {
	if f.save == "" {
		return nil
	}
	refuse := func(why error) error {
		if trainErr != nil {
			fmt.Fprintf(stderr, "dpsgd: --save %s: no model saved: %v\n", f.save, why)
			return nil
		}
		return fmt.Errorf("--save %s: no model saved: %w", f.save, why)
	}
	switch {
	case res.Diverged:
		return refuse(errors.New("the run diverged"))
	case trainErr != nil && !res.Interrupted:
		return refuse(errors.New("the run failed"))
	case res.Model == nil:
		return refuse(errors.New("the run's parameters could not be read back or are not finite"))
	}
	g, err := rc.priv.Release(res)
	if err != nil {
		return refuse(err)
	}
	pre, err := f.preprocessing()
	if err != nil {
		return refuse(err)
	}
	a := &model.Artifact{Arch: rc.cfg.Arch, Params: res.Model, Preprocessing: pre, Guarantee: g}
	// A layer-stack model has no PyTorch layout (model.ErrNoTorchLayout): its release is the
	// model file alone, and "safetensors" is empty in the JSON.
	st, err := model.EncodeSafetensors(a)
	noTorch := errors.Is(err, model.ErrNoTorchLayout)
	if err != nil && !noTorch {
		return fmt.Errorf("--save %s: %w", f.save, err)
	}
	if err := model.WriteFile(f.save, a); err != nil {
		return fmt.Errorf("--save: %w", err)
	}
	if noTorch {
		out.SavedModel = &savedJSON{File: f.save}
		if !f.quiet {
			fmt.Fprintf(stderr, "dpsgd: model saved to %s (a public release: dpsgd eval --model, dpsgd predict --model; docs/model-files.md); no safetensors: a layer-stack model has no PyTorch layout yet\n", f.save)
		}
		return nil
	}
	if err := atomicfile.WriteFile(safetensorsPath(f.save), st, 0o644); err != nil {
		return fmt.Errorf("--save: %s: %w", safetensorsPath(f.save), err)
	}
	out.SavedModel = &savedJSON{File: f.save, Safetensors: safetensorsPath(f.save)}
	if !f.quiet {
		fmt.Fprintf(stderr, "dpsgd: model saved to %s and %s (a public release: dpsgd eval --model, dpsgd predict --model; docs/model-files.md)\n",
			f.save, safetensorsPath(f.save))
	}
	return nil
}

// preprocessing is the saved model's preprocessing: the built-in dataset's name, or for the
// user's own data its kind (csv, idx) and the schema it was encoded with, the validated
// schema as JSON (--label applied). That schema is the public document the user wrote: it
// holds nothing read from the data, and the model holds no path of it or of the data.
func (f *trainFlags) preprocessing() (model.Preprocessing, error) {
	p := model.Preprocessing{Dataset: f.dataset}
	if f.dataset != model.DatasetCSV && f.dataset != model.DatasetIDX {
		return p, nil
	}
	if f.own.encodedWith == nil {
		return p, errors.New("the schema the data was encoded with is unknown")
	}
	js, err := json.Marshal(f.own.encodedWith)
	if err != nil {
		return p, fmt.Errorf("encoding the schema: %w", err)
	}
	p.Schema = js
	return p, nil
}
