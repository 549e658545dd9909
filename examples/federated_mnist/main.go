// Command federated_mnist compares personalized per-client noise with one noise level set by
// the strictest client, and with non-private training, in federated learning on MNIST
// (the personalized-DP FL appendix, see privacy/personalized; docs/federated.md).
//
// The 60000 training images are split IID over 100 clients (600 each); a third of the clients
// ask for ε = 1, a third for ε = 2 and a third for ε = 4, all with δ = 1e-5 (split evenly into
// the Gaussian mechanism's δ' and Lemma 1's tail δ‴). Each round makes K draws (client i
// with probability 1/100 per draw); a selected client trains I local DP-SGD steps on its own
// examples from the global model and sends its update; the server aggregates by eq. 15. Three
// runs share every setting and seed:
//
//	personalized  each client's noise calibrated to its own εᵢ (tight GDP calibration)
//	uniform       every client gets the noise of the strictest budget (ε = 1)
//	non-private   no clipping, no noise
//
// and the program prints the test accuracy of each and, per budget group, the noise
// multiplier, the selections and the ε spent (exact GDP accounting at the realized selections)
// against the budget.
//
//	go run ./examples/federated_mnist --data-dir DIR   # DIR holds the MNIST IDX files (docs/datasets.md)
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/dpsgd/dpsgd"
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/federated"
	"github.com/spf13/pflag"
	"gorgonia.org/tensor"
)

// errUsage marks a usage error (exit 2).
var errUsage = errors.New("usage")

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "federated_mnist:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "federated_mnist:", err)
		os.Exit(1)
	}
}

type options struct {
	dataDir                     string
	clients, rounds, k          int
	localSteps, localBatch      int
	lr, clip, delta             float64
	hidden                      int
	seed                        uint64
	partition, only, epsilonSet string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := pflag.NewFlagSet("federated_mnist", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dataDir, "data-dir", "", "directory with the MNIST IDX files (required; docs/datasets.md)")
	fs.IntVar(&o.clients, "clients", 100, "number of clients")
	fs.StringVar(&o.epsilonSet, "epsilons", "1,2,4", "budgets, assigned round-robin (a third each)")
	fs.Float64Var(&o.delta, "delta", 1e-5, "δᵢ of every client")
	fs.IntVar(&o.rounds, "rounds", 50, "rounds R")
	fs.IntVar(&o.k, "k", 50, "client draws per round K")
	fs.IntVar(&o.localSteps, "local-steps", 3, "local steps I per participation")
	fs.IntVar(&o.localBatch, "local-batch", 0, "examples per local step (0: all of the client's)")
	fs.Float64Var(&o.lr, "lr", 1, "local learning rate")
	fs.Float64Var(&o.clip, "clip", 1, "per-example clip norm C")
	fs.IntVar(&o.hidden, "hidden", 0, "hidden width of an MLP (0: logistic regression)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed")
	fs.StringVar(&o.partition, "partition", "iid", "iid or label")
	fs.StringVar(&o.only, "only", "", "run only these of personalized,uniform,non-private (comma-separated)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	var eps []float64
	for _, s := range strings.Split(o.epsilonSet, ",") {
		var v float64
		if _, err := fmt.Sscan(strings.TrimSpace(s), &v); err != nil {
			return fmt.Errorf("%w: --epsilons %q: want numbers, comma-separated", errUsage, o.epsilonSet)
		}
		eps = append(eps, v)
	}
	if o.dataDir == "" {
		return fmt.Errorf("%w: --data-dir: want the directory holding the MNIST IDX files (docs/datasets.md)", errUsage)
	}
	train, test, err := datasets.LoadMNIST(o.dataDir)
	if err != nil {
		return err
	}
	parts, err := federated.PartitionIndices(federated.Partition(o.partition), train.Y, o.clients, 0, o.seed)
	if err != nil {
		return err
	}
	clients := make([]dpsgd.Client, o.clients)
	examples := make([]int, o.clients)
	for i := range clients {
		// δ alone: the front door splits it evenly into δ' and δ‴.
		clients[i] = dpsgd.Client{ID: fmt.Sprintf("c%03d", i), Epsilon: eps[i%len(eps)], Delta: o.delta}
		examples[i] = len(parts[i])
	}
	arch := nn.LogReg(train.Shape, train.Classes)
	model := "logistic regression 784-10"
	if o.hidden > 0 {
		arch = nn.MLP(train.Shape, train.Classes, []int{o.hidden}, nn.Tanh)
		model = fmt.Sprintf("MLP 784-%d-10 (tanh)", o.hidden)
	}
	fmt.Fprintf(stdout, "MNIST, %d clients (%s, ~%d examples each), budgets ε ∈ {%s}, δ = %g; %s; R = %d rounds × K = %d draws, I = %d local steps, local batch %d, lr %g, C = %g, seed %d\n\n",
		o.clients, o.partition, train.N/o.clients, o.epsilonSet, o.delta, model, o.rounds, o.k, o.localSteps, o.localBatch, o.lr, o.clip, o.seed)
	runs := []struct {
		name       string
		uniform    bool
		nonPrivate bool
	}{{"personalized", false, false}, {"uniform", true, false}, {"non-private", false, true}}
	for _, r := range runs {
		if o.only != "" && !strings.Contains(","+o.only+",", ","+r.name+",") {
			continue
		}
		plan := dpsgd.FederatedPlan{
			Clients: clients, Examples: examples, Rounds: o.rounds, Draws: o.k, LocalSteps: o.localSteps,
			LocalBatch: o.localBatch, Clip: o.clip, UniformNoise: r.uniform, Seed: o.seed, NonPrivate: r.nonPrivate,
		}
		priv, err := plan.Resolve()
		if err != nil {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		cfg := federated.Config{
			Model: engine.Config{
				Arch: arch, Dtype: tensor.Float32,
				Optimizer: engine.OptimizerConfig{Name: engine.OptimizerSGD, LR: o.lr},
			},
			EvalEvery: max(1, o.rounds/5),
		}
		f, err := federated.New(cfg, priv, train, test, parts)
		if err != nil {
			return err
		}
		t0 := time.Now()
		rep, err := f.Run(ctx, func(st federated.RoundStats) {
			if st.TestAccuracy != nil {
				fmt.Fprintf(stderr, "  %s: round %d/%d test accuracy %.4f (%.0fs)\n", r.name, st.Round, st.Rounds, *st.TestAccuracy, st.Seconds)
			}
		})
		f.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%-13s test accuracy %.4f  (%d rounds, %.0f s)\n", r.name, rep.TestAccuracy, rep.Rounds, time.Since(t0).Seconds())
		if !r.nonPrivate {
			printGroups(stdout, rep)
		}
	}
	return nil
}

// printGroups prints, per budget, the noise, the selections and the ε spent.
func printGroups(w io.Writer, rep *federated.Report) {
	groups := map[float64][]federated.ClientReport{}
	for _, c := range rep.Clients {
		groups[c.Epsilon] = append(groups[c.Epsilon], c)
	}
	var keys []float64
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Float64s(keys)
	fmt.Fprintf(w, "    %-8s %7s %10s %12s %9s %16s %14s %7s\n", "budget ε", "clients", "multiplier", "σ (on mean)", "R_i", "selections mean", "ε spent mean/max", "ε at R_i")
	for _, k := range keys {
		g := groups[k]
		var sel, spent, maxSpent, bound float64
		for _, c := range g {
			sel += float64(c.Selections)
			s := *c.EpsilonSpent
			spent += s
			maxSpent = math.Max(maxSpent, s)
			bound = math.Max(bound, c.EpsilonBound)
		}
		n := float64(len(g))
		fmt.Fprintf(w, "    %-8g %7d %10.4g %12.4g %9d %16.2f %7.3f/%-7.3f %7.3f\n", k, len(g), g[0].Multiplier, g[0].Sigma, g[0].RoundsBound, sel/n, spent/n, maxSpent, bound)
	}
}
