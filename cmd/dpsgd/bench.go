package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dpsgd/dpsgd/bench"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
	"gorgonia.org/tensor"
)

const benchUsage = `Usage: dpsgd bench samplers|step [flags]

  samplers  train with each sampler at each target (ε, δ), σ calibrated by the sampler's own
            accountant; write report.md, results.json, results.csv and PNG/SVG figures to --out
  step      time one DP step against one non-private step per batch size
`

// cmdBench runs dpsgd bench samplers|step.
func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("bench: want a subcommand, samplers or step")
	}
	switch args[0] {
	case "samplers":
		return benchSamplers(ctx, args[1:], stdout, stderr)
	case "step":
		return benchStep(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, benchUsage)
		return nil
	}
	return usagef("bench: unknown subcommand %q (want samplers or step)", args[0])
}

// benchSamplerFlags are the flags of dpsgd bench samplers.
type benchSamplerFlags struct {
	dataset, dataDir, cacheDir, model, hidden, activation string
	targets, seedList, samplers, accountants, out         string
	epochs, batch, physBatch, seeds, privEpochs, replicas int
	lr, clip, delta, sigma                                float64
	quick, quiet, jsonOut                                 bool
	blas                                                  string // --blas ("": DPSGD_BLAS, else auto)
	set                                                   map[string]bool
}

// benchEpochs are the training epochs of the full run per dataset (see benchPreset).
func benchEpochs(dataset string) int {
	switch dataset {
	case "mnist":
		return 20
	case "adult":
		return 20
	}
	return 5
}

func parseBenchSamplerFlags(args []string, stdout io.Writer) (*benchSamplerFlags, error) {
	f := &benchSamplerFlags{}
	fs := newFlagSet("dpsgd bench samplers")
	addBuiltinDataFlags(fs, &f.dataset, &f.dataDir, &f.cacheDir)
	fs.StringVar(&f.model, "model", "", "logreg, mlp or cnn (default: mlp, logreg for adult)")
	fs.StringVar(&f.hidden, "hidden", "", "hidden layer widths, comma-separated (default: mnist 128, synthetic 64, adult 32)")
	fs.StringVar(&f.activation, "activation", "", "tanh or relu (default tanh)")
	fs.Var(countFlag{&f.epochs, 1}, "epochs", "training epochs of every run (default: mnist 20, adult 20, synthetic 5; --quick 2)")
	fs.Var(countFlag{&f.batch, 1}, "batch-size", "expected batch size (default: mnist 2048, adult 512, synthetic 256; --quick 200)")
	fs.Var(countFlag{&f.physBatch, 1}, "physical-batch", "rows of the compiled graph (default 256)")
	fs.Var(countFlag{&f.replicas, 0}, "replicas", "graph replicas run in parallel (default: one per CPU)")
	addBLASFlag(fs, &f.blas)
	fs.Var(realFlag{&f.lr}, "lr", "learning rate > 0 (default: the dpsgd train preset of the dataset and model)")
	fs.Var(realFlag{&f.clip}, "clip", "per-example clip norm C > 0 (default 1)")
	fs.StringVar(&f.targets, "targets", "1,3,8", "target ε values, comma-separated, each > 0 (--quick default: 1,8)")
	fs.Var(realFlag{&f.delta}, "delta", "δ of every target, in (0, 1) (default 1e-5)")
	fs.Var(countFlag{&f.seeds, 1}, "seeds", "training runs per cell, seeds 1..n (default 3; --quick 2)")
	fs.StringVar(&f.seedList, "seed-list", "", "explicit seeds, comma-separated (instead of --seeds)")
	fs.StringVar(&f.samplers, "samplers", strings.Join(bench.DefaultSamplers(), ","), "samplers to compare, comma-separated")
	fs.StringVar(&f.accountants, "accountants", "", "accountant per sampler, e.g. allocation=rdp,poisson=rdp (default: each sampler's tightest proven one)")
	fs.StringVar(&f.out, "out", "", "output directory for report.md, results.json, results.csv and the figures (required)")
	fs.BoolVar(&f.quick, "quick", false, "a small version (synthetic data or a 4000-example subset, 2 epochs, 2 seeds, targets 1,8) that finishes in about a minute")
	fs.Var(countFlag{&f.privEpochs, 1}, "privacy-epochs", "privacy-only comparison: ε after epochs 1..n (default: --epochs, at least 10; --quick 3)")
	fs.Var(realFlag{&f.sigma}, "sigma", "privacy-only comparison: noise multiplier σ > 0 (default 1)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress output")
	fs.BoolVar(&f.jsonOut, "json", false, "print a JSON summary as the last line of stdout (also quiet)")
	var err error
	if f.set, err = parseFlags(fs, args, stdout, "Usage: dpsgd bench samplers [flags]\n\nTrains with each sampler at each target (ε, δ), σ calibrated by that sampler's own proven accountant,\nand writes report.md, results.json, results.csv and PNG/SVG figures into --out."); err != nil {
		return nil, err
	}
	return f, nil
}

// benchFloats parses a comma-separated list of finite numbers > 0.
func benchFloats(flagName, s string) ([]float64, error) {
	var out []float64
	for _, part := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, usagef("--%s %q: value %q: want finite numbers > 0, comma-separated", flagName, s, part)
		}
		out = append(out, v)
	}
	return out, nil
}

// benchSubset returns the first n examples of d (d itself if it has no more).
func benchSubset(d *datasets.Dataset, n int) *datasets.Dataset {
	if d.N <= n {
		return d
	}
	c := *d
	c.N, c.X, c.Y = n, d.X[:n*d.D], d.Y[:n]
	return &c
}

// benchConfig turns the flags into a comparison.
func (f *benchSamplerFlags) config(ctx context.Context) (*bench.SamplersConfig, error) {
	switch f.dataset {
	case "synthetic", "mnist", "adult":
	default:
		return nil, usagef("--dataset %q: want synthetic, mnist or adult", f.dataset)
	}
	if f.model == "" {
		f.model = "mlp"
		if f.dataset == "adult" {
			f.model = "logreg"
		}
	}
	switch f.model {
	case "logreg", "mlp", "cnn":
	default:
		return nil, usagef("--model %q: want logreg, mlp or cnn", f.model)
	}
	p := presetFor(f.dataset, f.model)
	epochs, batch, seeds, targets, privEpochs := benchEpochs(f.dataset), p.batch, 3, f.targets, 0
	if f.dataset == "mnist" && f.model == "mlp" {
		// The comparison's own model and rate (docs/benchmarks.md, "Samplers compared"), not
		// train's later preset.
		batch, p.hidden, p.lr = 2048, []int{128}, 0.3
	}
	if f.quick {
		epochs, batch, seeds, privEpochs = 2, 200, 2, 3
		if !f.set["targets"] {
			targets = "1,8"
		}
	}
	orPreset(f.set["epochs"], &f.epochs, epochs)
	orPreset(f.set["batch-size"], &f.batch, batch)
	orPreset(f.set["seeds"], &f.seeds, seeds)
	orPreset(f.set["lr"], &f.lr, p.lr)
	orPreset(f.set["clip"], &f.clip, 1.0)
	orPreset(f.set["delta"], &f.delta, 1e-5)
	orPreset(f.set["sigma"], &f.sigma, 1.0)
	orPreset(f.set["physical-batch"], &f.physBatch, 256)
	orPreset(f.set["activation"], &f.activation, p.activation)
	if privEpochs == 0 {
		privEpochs = max(f.epochs, 10)
	}
	orPreset(f.set["privacy-epochs"], &f.privEpochs, privEpochs)
	if !(f.lr > 0) {
		return nil, usagef("--lr %v: want a finite value > 0", f.lr)
	}
	if !(f.clip > 0) {
		return nil, usagef("--clip %v: want a finite value > 0", f.clip)
	}
	if !(f.delta > 0 && f.delta < 1) {
		return nil, usagef("--delta %v: want a value in (0, 1)", f.delta)
	}
	if !(f.sigma > 0) {
		return nil, usagef("--sigma %v: want a finite value > 0", f.sigma)
	}
	if f.epochs > 10000 {
		return nil, usagef("--epochs %d: want a value in [1, 10000]", f.epochs)
	}
	if f.privEpochs > 10000 {
		return nil, usagef("--privacy-epochs %d: want a value in [1, 10000]", f.privEpochs)
	}
	if f.seeds > 1000 {
		return nil, usagef("--seeds %d: want a value in [1, 1000]", f.seeds)
	}
	if f.out == "" {
		return nil, usagef("--out: want an output directory")
	}
	tl, err := benchFloats("targets", targets)
	if err != nil {
		return nil, err
	}
	var seedList []uint64
	if f.seedList != "" {
		if f.set["seeds"] {
			return nil, usagef("--seeds and --seed-list: give one of them")
		}
		for _, part := range strings.Split(f.seedList, ",") {
			v, err := strconv.ParseUint(strings.TrimSpace(part), 10, 64)
			if err != nil {
				return nil, usagef("--seed-list %q: value %q: want whole numbers ≥ 0, comma-separated", f.seedList, part)
			}
			seedList = append(seedList, v)
		}
	} else {
		for i := 1; i <= f.seeds; i++ {
			seedList = append(seedList, uint64(i))
		}
	}
	var smps []string
	for _, s := range strings.Split(f.samplers, ",") {
		s = strings.TrimSpace(s)
		if accounting.Methods(s) == nil {
			return nil, usagef("--samplers %q: sampler %q: want shuffle, poisson, poisson-truncated or allocation", f.samplers, s)
		}
		smps = append(smps, s)
	}
	accs := map[string]string{}
	if f.accountants != "" {
		for _, part := range strings.Split(f.accountants, ",") {
			s, m, ok := strings.Cut(strings.TrimSpace(part), "=")
			if !ok || s == "" || m == "" {
				return nil, usagef("--accountants %q: entry %q: want sampler=method", f.accountants, part)
			}
			accs[s] = m
		}
	}
	act, hidden, err := parseLayers(f.activation, f.hidden, p.hidden)
	if err != nil {
		return nil, err
	}

	var train, test *datasets.Dataset
	if f.quick && f.dataset == "synthetic" {
		sc := datasets.DefaultSynthetic()
		sc.Train, sc.Test = 4000, 1000
		train, test, err = datasets.Synthetic(sc)
	} else {
		train, test, err = loadData(ctx, f.dataset, f.dataDir, f.cacheDir, 1)
	}
	if err != nil {
		return nil, err
	}
	if f.quick {
		train, test = benchSubset(train, 4000), benchSubset(test, 1000)
	}
	if f.batch > train.N {
		return nil, usagef("--batch-size %d: want ≤ the %d training examples", f.batch, train.N)
	}
	arch, err := newArch(f.model, f.dataset, train, hidden, act)
	if err != nil {
		return nil, err
	}
	sigmaTol := 0.0 // accounting.SolveSigma's, as dpsgd train
	if f.quick {
		sigmaTol = 1e-2
	}
	return &bench.SamplersConfig{
		Dataset: f.dataset, Model: f.model, Train: train, Test: test, BatchSize: f.batch,
		Engine: engine.Config{Arch: arch, Dtype: tensor.Float32, PhysicalBatch: min(f.physBatch, f.batch), Replicas: f.replicas,
			Epochs: f.epochs, Clip: f.clip,
			Optimizer: engine.OptimizerConfig{Name: p.optimizer, LR: f.lr, Momentum: p.momentum, WeightDecay: p.decay, Schedule: p.schedule, EMA: p.ema}},
		Samplers: smps, Accountants: accs, Targets: tl, Delta: f.delta, Seeds: seedList,
		PrivacyEpochs: f.privEpochs, PrivacySigma: f.sigma, Quick: f.quick, SigmaTolerance: sigmaTol,
	}, nil
}

// benchProgress prints calibrations and runs on stderr, and each run's epochs (progress.go).
type benchProgress struct {
	w        io.Writer
	quiet    bool
	perEpoch map[string]int
	epochs   int
	start    time.Time
}

func (p *benchProgress) Calibrated(c bench.Cell) {
	if !p.quiet {
		fmt.Fprintf(p.w, "dpsgd bench: %s (%s) at ε = %g, δ = %g: σ = %.4g (calibrated in %.1f s)\n",
			c.Sampler, c.Accountant, c.TargetEpsilon, c.Delta, c.Sigma, c.CalibrationSeconds)
	}
}

func (p *benchProgress) RunStart(i, total int, r bench.Run) engine.Progress {
	if p.quiet {
		return engine.NopProgress{}
	}
	fmt.Fprintf(p.w, "dpsgd bench: run %d/%d: %s at ε = %g, seed %d, σ = %.4g (%.0f s elapsed)\n",
		i, total, r.Sampler, r.TargetEpsilon, r.Seed, r.Sigma, time.Since(p.start).Seconds())
	return newProgress(p.w, false, false, p.perEpoch[r.Sampler], p.epochs)
}

func (p *benchProgress) RunDone(r bench.Run) {}

// benchSummary is the --json line of dpsgd bench samplers.
type benchSummary struct {
	Out     string       `json:"out"`
	Files   []string     `json:"files"`
	Dataset string       `json:"dataset"`
	Model   string       `json:"model"`
	Seconds float64      `json:"seconds"`
	Cells   []bench.Cell `json:"cells"`
	BLAS    string       `json:"blas"` // the CPU BLAS the runs used
}

func benchSamplers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseBenchSamplerFlags(args, stdout)
	if err != nil {
		return err // pflag.ErrHelp after --help: report exits 0
	}
	quiet := f.quiet || f.jsonOut
	cfg, err := f.config(ctx)
	if err != nil {
		return err
	}
	// Before any training: an output directory that cannot be written fails at once.
	if err := bench.CheckWritable(f.out); err != nil {
		return usagef("--out %q: %v", f.out, err)
	}
	blas, err := blasPrepare(f.blas, f.replicas)
	if err != nil {
		return err
	}
	cfg.Command = "dpsgd bench samplers " + strings.Join(args, " ")
	prog := &benchProgress{w: stderr, quiet: quiet, perEpoch: map[string]int{}, epochs: cfg.Engine.Epochs, start: time.Now()}
	for _, s := range cfg.Samplers {
		smp, _, err := bench.NewSampler(s, cfg.Accountants[s], cfg.Train.N, cfg.BatchSize, 1)
		if err != nil {
			return benchErr(err)
		}
		prog.perEpoch[s] = smp.StepsPerEpoch()
	}
	if !quiet {
		fmt.Fprintf(stderr, "dpsgd bench: %s %s, %d samplers × %d targets × %d seeds, %d epochs each; calibrating σ first\n",
			cfg.Dataset, cfg.Model, len(cfg.Samplers), len(cfg.Targets), len(cfg.Seeds), cfg.Engine.Epochs)
	}
	blasDesc := blasInstall(blas, quiet, stderr)
	defer blasRestore()
	res, err := bench.Samplers(ctx, *cfg, prog)
	if err != nil {
		return benchErr(err)
	}
	if err := bench.WriteReport(f.out, res); err != nil {
		return benchErr(err)
	}
	if !f.jsonOut || !f.quiet {
		fmt.Fprint(stdout, benchCellsText(res))
		fmt.Fprintf(stdout, "report: %s\n", filepath.Join(f.out, bench.ReportFile))
	}
	if f.jsonOut {
		return printJSON(stdout, benchSummary{Out: f.out, Files: bench.ReportFiles(), Dataset: res.Dataset, Model: res.Model, Seconds: res.Seconds, Cells: res.Cells, BLAS: blasDesc})
	}
	return nil
}

// benchErr makes configuration errors, unreachable targets and unwritable output usage errors
// (exit 2).
func benchErr(err error) error {
	var ue usageError
	if errors.As(err, &ue) {
		return err
	}
	if errors.Is(err, bench.ErrInvalid) || errors.Is(err, privacy.ErrUnreachable) || errors.Is(err, bench.ErrUnwritable) {
		return usageError{err}
	}
	return err
}

// benchCellsText is the summary table printed on stdout.
func benchCellsText(r *bench.SamplersResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-18s %-8s %8s %8s %8s %10s %8s %12s %8s\n", "sampler", "acct", "target ε", "σ", "ε spent", "accuracy", "sd", "examples/s", "s/epoch")
	for _, c := range r.Cells {
		fmt.Fprintf(&b, "%-18s %-8s %8s %8s %8s %10s %8s %12s %8s\n", c.Sampler, c.Accountant, bench.Num(c.TargetEpsilon), bench.Num(c.Sigma),
			bench.NumPtr(c.EpsilonSpent), bench.Num(c.AccuracyMean), bench.Num(c.AccuracySD), bench.Num(c.ExamplesPerSecond), bench.Num(c.SecondsPerEpoch))
	}
	return b.String()
}

// benchStepFlags are the flags of dpsgd bench step.
type benchStepFlags struct {
	dataset, model, hidden, activation, batches, device string
	precision                                           string
	physBatch, replicas, minSteps                       int
	minTime                                             float64
	float64, jsonOut, quiet                             bool
	blas                                                string // --blas ("": DPSGD_BLAS, else auto)
}

func benchStep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := &benchStepFlags{}
	fs := newFlagSet("dpsgd bench step")
	fs.StringVar(&f.dataset, "dataset", "mnist", "input shape and classes: mnist (1×28×28, 10 classes), cifar10 (3×32×32, 10 classes) or synthetic (32 features, 10 classes); no data is read")
	fs.StringVar(&f.model, "model", "mlp", "logreg, mlp, cnn, transformer or wrn16-4 (transformer and wrn16-4 are the train presets: --hidden and --activation do not apply)")
	fs.StringVar(&f.hidden, "hidden", "256", "hidden layer widths, comma-separated (mlp; cnn: the dense layer)")
	fs.StringVar(&f.activation, "activation", "tanh", "tanh or relu")
	fs.StringVar(&f.batches, "batch-sizes", "256,1024", "logical batch sizes, comma-separated")
	fs.StringVar(&f.device, "device", "auto", "cpu, auto (the CPU, and the GPU too when there is one) or cuda (the GPU only; float32 models)")
	fs.StringVar(&f.precision, "precision", engine.PrecisionFP32, "the GPU rows' GEMMs: fp32, or bf16 (bfloat16 operands, fp32 accumulation; norms, clipping, sums and noise exact); the default stays fp32 until bf16 is measured on a real GPU (docs/gpu.md)")
	fs.Var(countFlag{&f.physBatch, 0}, "physical-batch", "rows of the compiled graph (0: min(256, batch))")
	fs.Var(countFlag{&f.replicas, 0}, "replicas", "graph replicas run in parallel (0: one per CPU)")
	addBLASFlag(fs, &f.blas)
	fs.Var(countFlag{&f.minSteps, 1}, "min-steps", "at least this many measured steps per mode (default 5)")
	fs.Var(realFlag{&f.minTime}, "min-time", "seconds of measurement per mode and batch size, in (0, 600] (default 1)")
	fs.BoolVar(&f.float64, "float64", false, "compute in float64")
	fs.BoolVar(&f.quiet, "quiet", false, "no table on stdout with --json")
	fs.BoolVar(&f.jsonOut, "json", false, "print the result as one JSON object on the last line of stdout")
	set, err := parseFlags(fs, args, stdout, "Usage: dpsgd bench step [flags]\n\nTimes one DP-SGD step against one non-private step of the same model, interleaved, per batch size.")
	if err != nil {
		return err // pflag.ErrHelp after --help: report exits 0
	}
	orPreset(set["min-steps"], &f.minSteps, 5)
	orPreset(set["min-time"], &f.minTime, 1.0)
	if !(f.minTime > 0 && f.minTime <= 600) {
		return usagef("--min-time %v: want seconds in (0, 600]", f.minTime)
	}
	var shape []int
	switch f.dataset {
	case "mnist":
		shape = []int{1, 28, 28}
	case "cifar10":
		shape = []int{3, 32, 32}
	case "synthetic":
		shape = []int{32}
	default:
		return usagef("--dataset %q: want mnist, cifar10 or synthetic", f.dataset)
	}
	act, err := nn.ParseActivation(f.activation)
	if err != nil {
		return usagef("--activation: %v", err)
	}
	hidden, err := parseWidths(f.hidden)
	if err != nil {
		return usagef("--hidden %q: %v", f.hidden, err)
	}
	var arch nn.Arch
	switch f.model {
	case "logreg":
		arch = nn.LogReg(shape, 10)
	case "mlp":
		arch = nn.MLP(shape, 10, hidden, act)
	case "cnn":
		if len(shape) != 3 {
			return usagef("--model cnn needs image input: use --dataset mnist")
		}
		arch = nn.CNN(shape, 10, hidden, act)
	case "transformer":
		if len(shape) != 3 {
			return usagef("--model transformer needs image input: use --dataset mnist or cifar10")
		}
		arch = nn.Transformer(shape, 10, nn.TransformerWidth, nn.TransformerHeads, 2)
	case "wrn16-4":
		if arch, err = nn.WideResNet(shape, 10, 16, 4); err != nil {
			return usagef("--model wrn16-4: %v (use --dataset mnist or cifar10)", err)
		}
	default:
		return usagef("--model %q: want logreg, mlp, cnn, transformer or wrn16-4", f.model)
	}
	var batches []int
	for _, part := range strings.Split(f.batches, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || v < 1 || v > 1<<20 {
			return usagef("--batch-sizes %q: value %q: want whole numbers in [1, 1048576], comma-separated", f.batches, part)
		}
		batches = append(batches, v)
	}
	switch f.device {
	case bench.DeviceCPU, bench.DeviceAuto, bench.DeviceCUDA:
	default:
		return usagef("--device %q: want cpu, auto or cuda", f.device)
	}
	switch {
	case f.precision != engine.PrecisionFP32 && f.precision != engine.PrecisionBF16:
		return usagef("--precision %q: want fp32 or bf16", f.precision)
	case f.precision == engine.PrecisionBF16 && f.device == bench.DeviceCPU:
		return usagef("--precision bf16: the CPU computes in fp32 or fp64 only; want --device cuda or auto")
	case f.precision == engine.PrecisionBF16 && f.float64:
		return usagef("--precision bf16 with --float64: want one of them")
	}
	dt := tensor.Float32
	if f.float64 {
		dt = tensor.Float64
	}
	blas, err := blasPrepare(f.blas, f.replicas)
	if err != nil {
		return err
	}
	blasDesc := blasInstall(blas, f.jsonOut || f.quiet, stderr)
	defer blasRestore()
	res, err := bench.Step(ctx, bench.StepConfig{Model: f.model, Arch: arch, Dtype: dt, BatchSizes: batches, Device: f.device,
		PhysicalBatch: f.physBatch, Replicas: f.replicas, MinTime: time.Duration(f.minTime * float64(time.Second)), MinSteps: f.minSteps, Seed: 1,
		Precision: f.precision})
	if err != nil {
		return benchErr(err)
	}
	if !f.jsonOut || !f.quiet {
		fmt.Fprint(stdout, bench.StepTable(res))
		fmt.Fprintf(stdout, "CPU BLAS: %s\n", blasDesc)
	}
	if f.jsonOut {
		return printJSON(stdout, struct {
			*bench.StepResult
			BLAS string `json:"blas"` // the CPU BLAS of the CPU rows
		}{res, blasDesc})
	}
	return nil
}
