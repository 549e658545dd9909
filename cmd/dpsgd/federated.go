package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/dpsgd/dpsgd"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/federated"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
	"gorgonia.org/tensor"
)

// fedHeader is the --help text of dpsgd federated.
const fedHeader = `Usage: dpsgd federated [flags]

Federated DP training with a personal budget per client (the personalized-DP FL appendix;
docs/federated.md). The training set is split over N clients (--partition iid, or label: 2 label
shards each). Each of --rounds rounds makes --k draws; a draw selects client i with probability
q_i (--sample-rate, default 1/N). A selected client trains --local-steps DP-SGD steps from the
global model with its own noise (--mode gradient), or releases one noisy update (--mode output),
calibrated to its (epsilon_i, delta_i) and to Lemma 1's bound R_i on its selections
(--calibration gdp: the tight GDP one, or seed: the appendix's classic constant). The server
aggregates by eq. 15 with weights C_n·p_n/(K·q_n). A client that has taken part R_i times is
retired.

Clients come from flags (--clients, --epsilons assigned round-robin, --delta, --sample-rate) or
from --clients-file (CSV with a header, or JSON; columns id, epsilon, delta or delta_prime and
delta_tail, optional sample_rate, share, sensitivity).`

// fedFlags are the flags of dpsgd federated.
type fedFlags struct {
	clientsFile, epsilons, partition       string
	dataset, dataDir, cacheDir             string
	model, hidden, activation              string
	mode, calibration, sampling, optimizer string
	clients, shards, rounds, k             int
	localSteps, localBatch, evalEvery      int
	workers                                int
	delta, deltaTail, sampleRate           float64
	lr, clip, momentum, logisticK, gammaL  float64
	seed                                   uint64
	uniform, nonPrivate, float64, quiet    bool
	jsonOut, privateStats                  bool
	set                                    map[string]bool
}

func fedParseFlags(args []string, stdout io.Writer) (*fedFlags, error) {
	f := &fedFlags{}
	fs := newFlagSet("dpsgd federated")
	fs.StringVar(&f.clientsFile, "clients-file", "", "clients file (CSV or JSON): id, epsilon, delta (or delta_prime and delta_tail), sample_rate, share, sensitivity")
	fs.Var(countFlag{&f.clients, 1}, "clients", "N, the number of clients (without --clients-file; default 10)")
	fs.StringVar(&f.epsilons, "epsilons", "1,2,4", "budgets ε_i > 0, comma-separated, assigned to the clients round-robin (without --clients-file)")
	fs.Var(realFlag{&f.delta}, "delta", "δ_i in (0, 1) of every client, split evenly into δ' and δ‴ (without --clients-file; default 1e-5)")
	fs.Var(realFlag{&f.deltaTail}, "delta-tail", "δ‴ in (0, δ): the probability of exceeding R_i; δ' then makes up δ (default: even split)")
	fs.Var(realFlag{&f.sampleRate}, "sample-rate", "q_i in (0, 1] of every client (without --clients-file; default 1/N)")
	fs.StringVar(&f.partition, "partition", "iid", "iid, or label (non-IID: each client gets --shards label-sorted shards)")
	fs.Var(countFlag{&f.shards, 1}, "shards", "label shards per client with --partition label")
	addBuiltinDataFlags(fs, &f.dataset, &f.dataDir, &f.cacheDir)
	fs.StringVar(&f.model, "model", "logreg", "logreg, mlp or cnn")
	fs.StringVar(&f.hidden, "hidden", "64", "hidden layer widths, comma-separated (mlp; cnn: the dense layer)")
	fs.StringVar(&f.activation, "activation", "tanh", "tanh or relu")
	fs.Var(countFlag{&f.rounds, 1}, "rounds", "R, the number of rounds (default 30)")
	fs.Var(countFlag{&f.k, 1}, "k", "K, client draws per round, at most N (default min(5, N))")
	fs.Var(countFlag{&f.localSteps, 1}, "local-steps", "I, local steps per participation (default 3 with --mode gradient, 1 with output)")
	fs.Var(countFlag{&f.localBatch, 0}, "local-batch", "examples per local step, drawn from the client's own (0: all of them, the default: a larger batch divides the same noise by more examples)")
	fs.Var(realFlag{&f.lr}, "lr", "local learning rate γ > 0 (default 1)")
	fs.Var(realFlag{&f.clip}, "clip", "per-example clip norm C > 0 (default 1)")
	fs.StringVar(&f.optimizer, "optimizer", "sgd", "local optimizer: sgd or momentum (reset at every participation)")
	fs.Var(realFlag{&f.momentum}, "momentum", "momentum coefficient in [0, 1) with --optimizer momentum (default 0.9)")
	fs.StringVar(&f.mode, "mode", "gradient", "gradient (noise on every local step) or output (one noisy update per participation)")
	fs.StringVar(&f.calibration, "calibration", "gdp", "gdp (tight, valid at every ε) or seed (the appendix's classic constant)")
	fs.BoolVar(&f.uniform, "uniform-noise", false, "give every client the noise of the strictest budget (the comparison point of personalized noise)")
	fs.StringVar(&f.sampling, "sampling", "", "categorical (rates sum to 1) or bernoulli (K trials per client); default: categorical when the rates sum to 1")
	fs.Var(realFlag{&f.logisticK}, "logistic-k", "Lemma 1's logistic constant k > 0 (default 1.702)")
	fs.Var(realFlag{&f.gammaL}, "gamma-l", "γ·L ≥ 0 for eq. 11's utility cost (default: the learning rate, L = 1)")
	fs.Var(countFlag{&f.evalEvery, 0}, "eval-every", "evaluate the global model every this many rounds (0: after the last; default 10)")
	fs.Var(countFlag{&f.workers, 0}, "workers", "clients trained at once (0: one per CPU)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the partition, initialization, client sampling, batches and noise")
	fs.BoolVar(&f.nonPrivate, "non-private", false, "baseline without clipping, noise, budgets or retirement (same rounds)")
	fs.BoolVar(&f.float64, "float64", false, "compute in float64 instead of float32")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress output")
	fs.BoolVar(&f.jsonOut, "json", false, "print the report as one JSON object on the last line of stdout")
	fs.BoolVar(&f.privateStats, "private-stats", false, "also print and report the clients' mean training loss of each round, computed from their data without noise: NOT covered by the guarantee")
	var err error
	if f.set, err = parseFlags(fs, args, stdout, fedHeader); err != nil {
		return nil, err
	}
	return f, nil
}

// fedRun is a resolved federated run.
type fedRun struct {
	cfg         federated.Config
	plan        dpsgd.FederatedPlan
	parts       [][]int
	train, test *datasets.Dataset
}

func (f *fedFlags) resolve(ctx context.Context) (*fedRun, error) {
	orPreset(f.set["clients"], &f.clients, 10)
	orPreset(f.set["delta"], &f.delta, 1e-5)
	orPreset(f.set["rounds"], &f.rounds, 30)
	orPreset(f.set["local-batch"], &f.localBatch, 0)
	orPreset(f.set["lr"], &f.lr, 1)
	orPreset(f.set["clip"], &f.clip, 1)
	orPreset(f.set["momentum"], &f.momentum, 0.9)
	orPreset(f.set["eval-every"], &f.evalEvery, 10)
	orPreset(f.set["shards"], &f.shards, federated.DefaultShards)
	if f.clientsFile != "" {
		for _, fl := range []string{"clients", "epsilons", "delta", "delta-tail", "sample-rate"} {
			if f.set[fl] {
				return nil, usagef("--%s: not with --clients-file (the file gives every client's values)", fl)
			}
		}
	}
	mode := dpsgd.Perturbation(f.mode) // checked by the front door
	if !f.set["local-steps"] {
		f.localSteps = 3
		if mode == dpsgd.OutputPerturbation {
			f.localSteps = 1
		}
	}
	var part federated.Partition
	switch f.partition {
	case "iid", "label":
		part = federated.Partition(f.partition)
	default:
		return nil, usagef("--partition %q: want iid or label", f.partition)
	}
	switch f.optimizer {
	case "sgd", "momentum":
	default:
		return nil, usagef("--optimizer %q: want sgd or momentum", f.optimizer)
	}
	if !(f.lr > 0) {
		return nil, usagef("--lr %v: out of range (0, +Inf)", f.lr)
	}
	if !(f.momentum >= 0 && f.momentum < 1) {
		return nil, usagef("--momentum %v: out of range [0, 1)", f.momentum)
	}
	if f.set["logistic-k"] && !(f.logisticK > 0) {
		return nil, usagef("--logistic-k %v: out of range (0, +Inf)", f.logisticK)
	}
	if !(f.gammaL >= 0) {
		return nil, usagef("--gamma-l %v: out of range [0, +Inf)", f.gammaL)
	}
	switch f.dataset {
	case "synthetic", "mnist", "adult":
	default:
		return nil, usagef("--dataset %q: want synthetic, mnist or adult", f.dataset)
	}
	switch f.model {
	case "logreg", "mlp", "cnn":
	default:
		return nil, usagef("--model %q: want logreg, mlp or cnn", f.model)
	}
	act, err := nn.ParseActivation(f.activation)
	if err != nil {
		return nil, usagef("--activation: %v", err)
	}
	hidden, err := parseWidths(f.hidden)
	if err != nil {
		return nil, usagef("--hidden %q: %v", f.hidden, err)
	}

	run := &fedRun{}
	var clients []dpsgd.Client
	if f.clientsFile != "" {
		fh, err := os.Open(f.clientsFile)
		if err != nil {
			return nil, usagef("--clients-file: %v", err)
		}
		clients, err = federated.ParseClients(fh, f.clientsFile)
		fh.Close()
		if err != nil {
			return nil, usagef("--clients-file: %v", err)
		}
	} else if clients, err = f.flagClients(); err != nil {
		return nil, err
	}
	n := len(clients)
	if !f.set["k"] {
		f.k = min(5, n)
	}

	run.train, run.test, err = loadData(ctx, f.dataset, f.dataDir, f.cacheDir, f.seed)
	if err != nil {
		return nil, err
	}
	if run.parts, err = federated.PartitionIndices(part, run.train.Y, n, f.shards, f.seed); err != nil {
		return nil, usagef("--partition %s with %d clients: %v", f.partition, n, err)
	}
	var arch nn.Arch
	switch f.model {
	case "logreg":
		arch = nn.LogReg(run.train.Shape, run.train.Classes)
	case "mlp":
		arch = nn.MLP(run.train.Shape, run.train.Classes, hidden, act)
	case "cnn":
		if len(run.train.Shape) != 3 {
			return nil, usagef("--model cnn needs image data ([C,H,W] examples); %s has shape %v", f.dataset, run.train.Shape)
		}
		arch = nn.CNN(run.train.Shape, run.train.Classes, hidden, act)
	}
	dt := tensor.Float32
	if f.float64 {
		dt = tensor.Float64
	}
	run.cfg = federated.Config{
		Model: engine.Config{
			Arch: arch, Dtype: dt,
			Optimizer: engine.OptimizerConfig{Name: f.optimizer, LR: f.lr, Momentum: f.momentum},
		},
		Workers: f.workers, EvalEvery: f.evalEvery, GammaL: f.gammaL, PrivateStats: f.privateStats,
	}
	examples := make([]int, n)
	for i, p := range run.parts {
		examples[i] = len(p)
	}
	run.plan = dpsgd.FederatedPlan{
		Clients: clients, Examples: examples,
		Rounds: f.rounds, Draws: f.k, LocalSteps: f.localSteps, LocalBatch: f.localBatch, Clip: f.clip,
		Mode: mode, Calibration: dpsgd.Calibration(f.calibration), UniformNoise: f.uniform,
		Sampling: dpsgd.ClientSampling(f.sampling), LogisticK: f.logisticK, Seed: f.seed, NonPrivate: f.nonPrivate,
	}
	return run, nil
}

// fedPlanFlags names the flag of each run-wide field of dpsgd.FederatedPlan, and
// fedClientFlags that of each client field (by its JSON key) when the clients come from flags.
var (
	fedPlanFlags = map[string]string{
		"Rounds": "--rounds", "Draws": "--k", "LocalSteps": "--local-steps", "LocalBatch": "--local-batch",
		"Clip": "--clip", "Mode": "--mode", "Calibration": "--calibration", "Sampling": "--sampling",
		"LogisticK": "--logistic-k",
	}
	fedClientFlags = map[string]string{
		"epsilon": "--epsilons", "delta": "--delta", "delta_prime": "--delta", "delta_tail": "--delta-tail",
		"sample_rate": "--sample-rate",
	}
)

// fedPlanUsage makes the front door's refusal of a federated plan a usage error (exit 2)
// naming the flag, or the clients file.
func (f *fedFlags) fedPlanUsage(err error) error {
	var fe *dpsgd.FieldError
	if !errors.As(err, &fe) {
		if errors.Is(err, dpsgd.ErrInvalid) {
			return usageError{err}
		}
		return err
	}
	if fl := fedPlanFlags[fe.Field]; fl != "" {
		return usagef("%s %s", fl, fe.Reason)
	}
	if f.clientsFile != "" {
		return usagef("--clients-file %s: %s %s", f.clientsFile, fe.Field, fe.Reason)
	}
	if _, key, ok := strings.Cut(fe.Field, "]."); ok && fedClientFlags[key] != "" {
		// The flags give every client the same values but ε: the client's name adds nothing.
		reason := fe.Reason
		if _, r, ok := strings.Cut(reason, ") "); ok && strings.HasPrefix(reason, "(client ") {
			reason = r
		}
		return usagef("%s %s", fedClientFlags[key], reason)
	}
	return usagef("%s %s", fe.Field, fe.Reason)
}

// flagClients makes the clients of --clients, --epsilons, --delta, --delta-tail and
// --sample-rate; the front door checks their values (dpsgd.Client.Resolve). A flag given as 0
// where a Client's 0 means "not given" is refused here.
func (f *fedFlags) flagClients() ([]dpsgd.Client, error) {
	var eps []float64
	for _, s := range strings.Split(f.epsilons, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, usagef("--epsilons %q: %q is not a number: want positive numbers, comma-separated", f.epsilons, strings.TrimSpace(s))
		}
		eps = append(eps, v)
	}
	for _, z := range []struct {
		flag, valid string
		v           float64
	}{{"delta", "(0, 1)", f.delta}, {"delta-tail", "(0, --delta)", f.deltaTail}, {"sample-rate", "(0, 1]", f.sampleRate}} {
		if f.set[z.flag] && z.v == 0 {
			return nil, usagef("--%s 0: want a value in %s", z.flag, z.valid)
		}
	}
	width := len(strconv.Itoa(f.clients - 1))
	cs := make([]dpsgd.Client, f.clients)
	for i := range cs {
		cs[i] = dpsgd.Client{ID: fmt.Sprintf("c%0*d", width, i), Epsilon: eps[i%len(eps)], Delta: f.delta}
		if f.set["delta-tail"] {
			cs[i].DeltaTail = f.deltaTail
		}
		if f.set["sample-rate"] {
			cs[i].SampleRate = f.sampleRate
		}
	}
	return cs, nil
}

// fedJSON is the --json report: the run's report (per-client epsilon, delta, sigma,
// selections, rounds_bound, retired, epsilon_spent; test_accuracy, rounds, utility_cost) and
// what was run. Keys are a contract (TestFederatedJSON): add, never rename.
type fedJSON struct {
	*federated.Report
	Dataset   string `json:"dataset"`
	Model     string `json:"model"`
	Params    int    `json:"params"`
	Partition string `json:"partition"`
	N         int    `json:"num_clients"`
	Seed      uint64 `json:"seed"`
	Guarantee string `json:"guarantee"`
	// NotCovered lists the values the guarantee does not cover: the test accuracy (the test
	// split is not the clients' data), the times, and with --private-stats the clients'
	// training loss.
	NotCovered []string `json:"not_covered_by_guarantee,omitempty"`
}

// cmdFederated runs dpsgd federated.
func cmdFederated(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := fedParseFlags(args, stdout)
	if err != nil {
		return err // pflag.ErrHelp after --help: report exits 0
	}
	run, err := f.resolve(ctx)
	if err != nil {
		return err
	}
	priv, err := run.plan.Resolve()
	if err != nil {
		return f.fedPlanUsage(err)
	}
	fed, err := federated.New(run.cfg, priv, run.train, run.test, run.parts)
	if err != nil {
		return usagef("%v", err)
	}
	defer fed.Close()
	cfg, plan := fed.Config(), priv.Plan
	if !f.quiet {
		fmt.Fprintln(stderr, "dpsgd: seeded noise and sampling: reproducible, not for production releases")
		what := fmt.Sprintf("%s calibration, %s perturbation", plan.Calibration, plan.Mode)
		if plan.UniformNoise {
			what += ", uniform noise (strictest budget)"
		}
		if plan.NonPrivate {
			what = "NON-PRIVATE baseline"
		}
		fmt.Fprintf(stderr, "dpsgd: %s %s on %s: %d clients (%s), %d rounds × K = %d (%s sampling), %d local steps, %s\n",
			f.model, archString(cfg.Model.Arch), f.dataset, len(plan.Clients), f.partition, plan.Rounds, plan.Draws, plan.Sampling, plan.LocalSteps, what)
	}
	prog := newFedProgress(stderr, f.quiet, plan.Rounds)
	rep, runErr := fed.Run(ctx, prog.round)
	prog.finish()
	if rep == nil || (runErr != nil && !rep.Interrupted) {
		return runErr
	}
	out := fedJSON{
		Report: rep, Dataset: f.dataset, Model: f.model, Params: fed.NumParams(), Partition: f.partition,
		N: len(rep.Clients), Seed: f.seed, Guarantee: priv.Guarantee(),
	}
	if !rep.NonPrivate {
		out.NotCovered = []string{"test_accuracy", "history[].test_accuracy", "seconds", "history[].seconds"}
		if f.privateStats {
			out.NotCovered = append(out.NotCovered, "history[].train_loss")
		}
	}
	if !f.quiet || !f.jsonOut {
		fedPrintSummary(stdout, rep)
	}
	if f.jsonOut {
		if err := printJSON(stdout, out); err != nil {
			return err
		}
	}
	return runErr
}

// fedPrintSummary prints the result: one line per client up to 20 clients, else one line per
// budget group.
func fedPrintSummary(w io.Writer, rep *federated.Report) {
	fmt.Fprintf(w, "test accuracy %.4f after %d of %d rounds (%.1f s)", rep.TestAccuracy, rep.Rounds, rep.RoundsPlan, rep.Seconds)
	if rep.UtilityCost != nil {
		fmt.Fprintf(w, ", utility cost (eq. 11) %.4g", *rep.UtilityCost)
	}
	fmt.Fprintln(w)
	if rep.NonPrivate {
		return
	}
	fmt.Fprintf(w, "retired %d clients, %d draws skipped\n", rep.Retired, rep.SkippedDraws)
	if len(rep.Clients) <= 20 {
		fmt.Fprintf(w, "%-12s %8s %9s %10s %10s %9s %10s %s\n", "client", "epsilon", "delta", "sigma", "multiplier", "sel/R_i", "spent", "retired")
		for _, c := range rep.Clients {
			fmt.Fprintf(w, "%-12s %8.4g %9.3g %10.4g %10.4g %4d/%-4d %10.4g %v\n",
				c.ID, c.Epsilon, c.Delta, c.Sigma, c.Multiplier, c.Selections, c.RoundsBound, fedSpent(c), c.Retired)
		}
		return
	}
	groups := map[float64][]federated.ClientReport{}
	for _, c := range rep.Clients {
		groups[c.Epsilon] = append(groups[c.Epsilon], c)
	}
	keys := make([]float64, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Float64s(keys)
	fmt.Fprintf(w, "%8s %8s %10s %10s %14s %12s %8s\n", "epsilon", "clients", "multiplier", "sel (mean)", "spent mean/max", "R_i (mean)", "retired")
	for _, k := range keys {
		g := groups[k]
		var sel, rb, mult, spent, maxSpent float64
		retired := 0
		for _, c := range g {
			sel += float64(c.Selections)
			rb += float64(c.RoundsBound)
			mult += c.Multiplier
			s := fedSpent(c)
			spent += s
			maxSpent = math.Max(maxSpent, s)
			if c.Retired {
				retired++
			}
		}
		n := float64(len(g))
		fmt.Fprintf(w, "%8.4g %8d %10.4g %10.2f %6.3f/%-7.3f %12.1f %8d\n", k, len(g), mult/n, sel/n, spent/n, maxSpent, rb/n, retired)
	}
}

func fedSpent(c federated.ClientReport) float64 {
	if c.EpsilonSpent == nil {
		return 0
	}
	return *c.EpsilonSpent
}

// fedProgress shows a bar per round on a terminal, a line per evaluation otherwise, nothing
// with --quiet.
type fedProgress struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	quiet bool
}

func newFedProgress(w io.Writer, quiet bool, rounds int) *fedProgress {
	p := &fedProgress{w: w, quiet: quiet}
	if quiet {
		return p
	}
	if fh, ok := w.(*os.File); ok && term.IsTerminal(int(fh.Fd())) {
		p.bar = progressbar.NewOptions(rounds,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("rounds"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString("rounds"),
			progressbar.OptionShowIts(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100_000_000),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

func (p *fedProgress) round(st federated.RoundStats) {
	if p.quiet {
		return
	}
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("round %d/%d%s retired %d", st.Round, st.Rounds, fedLoss(st, " loss %.3f"), st.Retired))
		_ = p.bar.Add(1)
	}
	if st.TestAccuracy == nil {
		return
	}
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	fmt.Fprintf(p.w, "round %4d/%d  participants %3d%s  test acc %.4f  retired %d  skipped draws %d  %.1fs\n",
		st.Round, st.Rounds, st.Participants, fedLoss(st, "  loss %.4f"), *st.TestAccuracy, st.Retired, st.SkippedDraws, st.Seconds)
}

// fedLoss formats the round's training loss, "" where the round does not report it (a private
// run without --private-stats).
func fedLoss(st federated.RoundStats, format string) string {
	if st.TrainLoss == nil {
		return ""
	}
	return fmt.Sprintf(format, *st.TrainLoss)
}

func (p *fedProgress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
