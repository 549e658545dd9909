package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/internal/boundedio"
)

// modelPreset is one --model preset: the one table that dpsgd train builds its model from
// (newArch) and dpsgd models lists. A new preset is a new row of modelPresets; its default
// widths for a dataset come from presetFor, as every other default of a run does.
type modelPreset struct {
	name  string
	about string
	image bool // needs [C, H, W] examples
	fixed bool // a layer stack of fixed widths: --hidden and --activation do not apply
	build func(input []int, classes int, hidden []int, act nn.Activation) nn.Arch
	// stack, for a preset that is a layer stack (its own widths and activation: --hidden and
	// --activation do not apply), builds it in place of build.
	stack func(input []int, classes int) (nn.Arch, error)
}

// modelPresets returns the presets, in the order they are listed.
func modelPresets() []modelPreset {
	return []modelPreset{
		{name: "logreg", about: "multinomial logistic regression: one dense layer",
			build: func(input []int, classes int, _ []int, _ nn.Activation) nn.Arch { return nn.LogReg(input, classes) }},
		{name: "mlp", about: "fully connected: dense hidden layers (--hidden), then the output layer",
			build: nn.MLP},
		{name: "cnn", about: "two convolutions with max pooling, a dense layer (--hidden), the output layer (Papernot et al.'s DP-SGD CNN)",
			image: true, build: nn.CNN},
		// A layer stack: its widths are fixed (--hidden and --activation are refused).
		{name: "transformer", about: "ViT-style: patch embedding, learned positions, 2 pre-LN blocks of 4-head self-attention and a GELU MLP (width 64), mean over patches, the output layer",
			image: true, fixed: true, build: func(input []int, classes int, _ []int, _ nn.Activation) nn.Arch {
				return nn.Transformer(input, classes, nn.TransformerWidth, nn.TransformerHeads, 2)
			}},
		{name: "wrn16-4", about: "WideResNet-16-4 with GroupNorm and weight-standardized convolutions (De et al.'s DP image classifier); ReLU, its own widths",
			image: true, fixed: true, stack: func(input []int, classes int) (nn.Arch, error) { return nn.WideResNet(input, classes, 16, 4) }},
		{name: "scatternet", about: "fixed scattering features (J 2, L 8), GroupNorm, one dense layer (Tramèr and Boneh's linear ScatterNet)",
			image: true, build: func(input []int, classes int, _ []int, _ nn.Activation) nn.Arch { return nn.ScatterNet(input, classes) }},
	}
}

// presetNames lists the presets' names as an error or a help text says them: "a, b or c".
func presetNames() string {
	var names []string
	for _, p := range modelPresets() {
		names = append(names, p.name)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// lookupPreset returns the preset called name, or a usage error naming --model and the presets.
func lookupPreset(name string) (modelPreset, error) {
	for _, p := range modelPresets() {
		if p.name == name {
			return p, nil
		}
	}
	return modelPreset{}, usagef("--model %q: want %s (dpsgd models lists them)", name, presetNames())
}

// arch builds preset p for examples of shape input with classes classes, or says why
// it does not apply to them.
func (p modelPreset) arch(dataset string, input []int, classes int, hidden []int, act nn.Activation) (nn.Arch, error) {
	if p.image && len(input) != 3 {
		return nn.Arch{}, usagef("--model %s needs image data ([C,H,W] examples); %s has shape %v", p.name, dataset, input)
	}
	if p.stack != nil {
		a, err := p.stack(input, classes)
		if err != nil {
			return nn.Arch{}, usagef("--model %s: %v", p.name, err)
		}
		return a, nil
	}
	return p.build(input, classes, hidden, act), nil
}

// isPreset reports whether --model names a preset; any other value is a model file
// (docs/models.md).
func isPreset(model string) bool {
	_, err := lookupPreset(model)
	return err == nil
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
	if p, err := lookupPreset(f.model); err == nil {
		for _, fl := range []string{"hidden", "activation"} {
			if p.fixed && f.set[fl] {
				return usagef("--%s does not apply to --model %s (its widths and activations are fixed; a model file can change them)", fl, p.name)
			}
		}
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
		return nil, usagef("--model %q: want %s (dpsgd models lists them) or a model file (docs/models.md); no such file", path, presetNames())
	}
	if err != nil {
		return nil, usagef("--model %s: %v", path, err)
	}
	if !st.Mode().IsRegular() || st.Size() > nn.MaxModelFileBytes {
		return nil, usagef("--model %s: want a regular file of at most %d bytes", path, nn.MaxModelFileBytes)
	}
	// The size is checked again while reading: the file may grow after the Stat.
	file, err := os.Open(path)
	if err != nil {
		return nil, usagef("--model %s: %v", path, err)
	}
	defer file.Close()
	data, err := boundedio.ReadAll(file, nn.MaxModelFileBytes, "", nil)
	if err != nil {
		return nil, usagef("--model %s: want a regular file of at most %d bytes: %v", path, nn.MaxModelFileBytes, err)
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
			if len(s.Shortcut) > 0 {
				p += "+shortcut(" + stackString(s.Shortcut) + ")"
			}
		case "attention":
			p += strconv.Itoa(s.Heads) + "x" + strconv.Itoa(s.Dim)
		}
		if s.Groups > 1 && s.Type == "conv2d" {
			p += "/g" + strconv.Itoa(s.Groups)
		}
		if s.Standardize {
			p += "ws"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "-")
}

// layerJSON is one layer with parameters of a listed model.
type layerJSON struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"` // dense or conv
	In        int    `json:"in"`   // inputs per output position (conv: channels·kernel²)
	Out       int    `json:"out"`
	Positions int    `json:"positions"` // output positions per example (dense: 1)
	Kernel    int    `json:"kernel,omitempty"`
	Stride    int    `json:"stride,omitempty"`
	Pad       int    `json:"pad,omitempty"`
	Pool      int    `json:"pool,omitempty"` // max-pooling window after the layer (0: none)
	Params    int    `json:"params"`
}

// modelJSON is one preset of dpsgd models.
type modelJSON struct {
	Name       string      `json:"name"`
	About      string      `json:"about"`
	Default    bool        `json:"default"`          // the model dpsgd train uses without --model
	Available  bool        `json:"available"`        // whether it applies to the dataset
	Reason     string      `json:"reason,omitempty"` // why not, when not available
	Hidden     []int       `json:"hidden,omitempty"`
	Activation string      `json:"activation,omitempty"`
	Params     int         `json:"params"`
	Layers     []layerJSON `json:"layers"`
	// OtherParams counts the parameters outside the GEMM layers listed (a layer stack's
	// normalizations and positional table): with the layers', the model's.
	OtherParams int `json:"other_params"`
	// Stack names a stack preset's layers (its layers list is then empty).
	Stack string `json:"stack,omitempty"`
}

// modelsJSON is what dpsgd models --json prints. Keys are a contract (TestModelsJSON); add,
// never rename.
type modelsJSON struct {
	Dataset string      `json:"dataset"`
	Input   []int       `json:"input"`
	Classes int         `json:"classes"`
	Models  []modelJSON `json:"models"`
	// LayerKinds are the layers a model file (--model FILE) may stack, each with what it takes.
	LayerKinds map[string]string `json:"layer_kinds"`
}

// listModels describes every preset on the built-in dataset b, with the widths and
// activation dpsgd train would use (presetFor).
func listModels(b datasets.Builtin) (modelsJSON, error) {
	out := modelsJSON{Dataset: b.Name, Input: b.Shape, Classes: b.Classes, Models: []modelJSON{}, LayerKinds: nn.LayerKinds()}
	def := defaultModel(b.Name)
	for _, p := range modelPresets() {
		pre := presetFor(b.Name, p.name)
		act, err := nn.ParseActivation(pre.activation)
		if err != nil {
			return out, fmt.Errorf("preset %s/%s: %w", b.Name, p.name, err)
		}
		m := modelJSON{Name: p.name, About: p.about, Default: p.name == def, Layers: []layerJSON{}}
		a, err := p.arch(b.Name, b.Shape, b.Classes, pre.hidden, act)
		if err != nil {
			var ue usageError
			if !errors.As(err, &ue) {
				return out, err
			}
			m.Reason = strings.TrimPrefix(ue.err.Error(), "--model "+p.name+" ")
			out.Models = append(out.Models, m)
			continue
		}
		if p.stack != nil {
			// A stack preset: its layer list, as the start-up line names it.
			m.Stack = stackString(a.Stack)
		}
		ls, err := a.Layers()
		if err != nil {
			return out, fmt.Errorf("preset %s on %s: %w", p.name, b.Name, err)
		}
		m.Available, m.Hidden, m.Params = true, a.Hidden, a.NumParams()
		if (len(a.Hidden) > 0 || len(a.Conv) > 0) && !p.fixed {
			m.Activation = string(a.Activation)
		}
		gs := stackGemmSpecs(a.Stack)
		for i, l := range ls {
			lj := layerJSON{Name: l.Name, Kind: "dense", In: l.In, Out: l.Out, Positions: l.Positions, Params: l.In*l.Out + l.Out}
			if i < len(a.Conv) {
				c := a.Conv[i]
				lj.Kind, lj.Kernel, lj.Stride, lj.Pad, lj.Pool = "conv", c.Kernel, c.Stride, c.Pad, c.PoolKernel
			}
			if i < len(gs) && gs[i].Type == "conv2d" {
				lj.Kind, lj.Kernel, lj.Stride, lj.Pad = "conv", gs[i].Kernel, gs[i].Stride, gs[i].Pad
			}
			m.Layers = append(m.Layers, lj)
			m.OtherParams -= lj.Params
		}
		m.OtherParams += m.Params
		out.Models = append(out.Models, m)
	}
	return out, nil
}

// modelsFlags are dpsgd models' flags, the dataset looked up.
type modelsFlags struct {
	dataset datasets.Builtin
	jsonOut bool
}

func parseModelsFlags(args []string, stdout io.Writer) (*modelsFlags, error) {
	f := &modelsFlags{}
	fs := newFlagSet("dpsgd models")
	dataset := fs.String("dataset", "mnist", "the built-in dataset whose input shape and classes size the models: "+strings.Join(datasets.BuiltinNames(), ", "))
	fs.BoolVar(&f.jsonOut, "json", false, "print one JSON object")
	if _, err := parseFlags(fs, args, stdout, "Usage: dpsgd models [--dataset NAME] [--json]\n\n"+
		"Lists the model presets of dpsgd train --model with their layers and parameter counts on a dataset, with the\n"+
		"widths and activation dpsgd train uses for it by default (--hidden and --activation change them), and the\n"+
		"layer kinds a model file (--model FILE, docs/models.md) may stack."); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %s: dpsgd models takes flags only", quoteArg(fs.Arg(0)))
	}
	b, err := datasets.LookupBuiltin(*dataset)
	switch {
	case err == nil:
		f.dataset = b
		return f, nil
	case *dataset == "csv" || *dataset == "idx":
		return nil, usagef("--dataset %s: the shape of your own data comes from its schema; want %s (dpsgd train --data … --json reports its model's params)", *dataset, strings.Join(datasets.BuiltinNames(), ", "))
	}
	return nil, usagef("--dataset %s: want %s", quoteArg(*dataset), strings.Join(datasets.BuiltinNames(), ", "))
}

// cmdModels is dpsgd models: the presets, their layers and parameter counts on a dataset.
func cmdModels(_ context.Context, args []string, stdout, _ io.Writer) error {
	f, err := parseModelsFlags(args, stdout)
	if err != nil {
		return err // pflag.ErrHelp after --help: report exits 0
	}
	list, err := listModels(f.dataset)
	if err != nil {
		return err
	}
	if f.jsonOut {
		return printJSON(stdout, list)
	}
	return printModels(stdout, list)
}

// printModels writes the listing as text: one block per preset, one line per layer.
func printModels(w io.Writer, list modelsJSON) error {
	shape := make([]string, len(list.Input))
	for i, s := range list.Input {
		shape[i] = strconv.Itoa(s)
	}
	fmt.Fprintf(w, "Model presets on %s (examples %s, %d classes), with the widths and activation dpsgd train uses for it:\n",
		list.Dataset, strings.Join(shape, "×"), list.Classes)
	for _, m := range list.Models {
		def := ""
		if m.Default {
			def = " (the default)"
		}
		if !m.Available {
			fmt.Fprintf(w, "\n%s%s: not for %s: %s\n", m.Name, def, list.Dataset, m.Reason)
			continue
		}
		act := ""
		if m.Activation != "" {
			act = ", " + m.Activation
		}
		fmt.Fprintf(w, "\n%s%s: %s parameters%s\n  %s\n", m.Name, def, groupDigits(m.Params), act, m.About)
		if m.Stack != "" {
			fmt.Fprintf(w, "  layers: %s\n", m.Stack)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, l := range m.Layers {
			what := fmt.Sprintf("dense %d → %d", l.In, l.Out)
			if l.Kind == "dense" && l.Positions > 1 {
				what += fmt.Sprintf(" at each of %d positions", l.Positions)
			}
			if l.Kind == "conv" {
				what = fmt.Sprintf("conv %d filters of %d inputs, %d×%d kernel, stride %d, pad %d, %d positions", l.Out, l.In, l.Kernel, l.Kernel, l.Stride, l.Pad, l.Positions)
				if l.Pool > 0 {
					what += fmt.Sprintf(", max-pool %d", l.Pool)
				}
			}
			fmt.Fprintf(tw, "    %s\t%s\t%12s\n", l.Name, what, groupDigits(l.Params))
		}
		if m.OtherParams > 0 {
			fmt.Fprintf(tw, "    (other)\tnormalizations' γ and β, positional table\t%12s\n", groupDigits(m.OtherParams))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(list.LayerKinds))
	for k := range list.LayerKinds {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "\nModel files (--model FILE, docs/models.md) stack these layers:")
	for _, k := range names {
		takes := list.LayerKinds[k]
		if takes == "" {
			takes = "-"
		}
		fmt.Fprintf(w, "  %-17s %s\n", k, takes)
	}
	fmt.Fprintln(w, "  batchnorm         refused: it mixes the examples of a batch; use groupnorm")
	return nil
}

// groupDigits writes n with thousands separated by commas.
func groupDigits(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// stackGemmSpecs lists a stack's layers in the order of its GEMM layers (Arch.Layers): a dense
// or conv2d layer for its one, an attention layer for each of its two (the projections).
func stackGemmSpecs(specs []nn.LayerSpec) []nn.LayerSpec {
	var out []nn.LayerSpec
	for _, s := range specs {
		switch s.Type {
		case "dense", "conv2d":
			out = append(out, s)
		case "attention":
			out = append(out, s, s)
		case "residual":
			out = append(out, stackGemmSpecs(s.Body)...)
		}
	}
	return out
}
