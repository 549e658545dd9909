package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/privacy"
	"github.com/dpsgd/dpsgd/privacy/accounting"
)

// notPrivateLabel marks, in human output, a value computed from the training data without
// privacy.
const notPrivateLabel = "[not private: computed from the training data, not covered by the guarantee]"

// chooseSeed decides where the seed comes from: --seed (a reproducible research run), the
// --resume checkpoint, or, by default, the operating system's generator. A default seed
// drawn at random is printed and recorded in checkpoints (it is needed to resume), never a
// fixed constant that anyone could use to regenerate the noise. Secure runs take no seed:
// their noise and batches come from the operating system (--seed then only fixes nothing).
func (f *trainFlags) chooseSeed() error {
	switch {
	case f.secure:
		f.seedSource = ""
	case f.fromCheckpoint["seed"]:
		f.seedSource = "checkpoint"
	case f.set["seed"]:
		f.seedSource = "given"
	default:
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("drawing a seed from the operating system: %w", err)
		}
		// 53 bits, so that the seed survives a JSON reader that parses numbers as doubles.
		f.seed = binary.LittleEndian.Uint64(b[:]) >> 11
		f.seedSource = "random"
		f.set["seed"] = true // recorded in checkpoints: a resume continues the same noise stream
	}
	return nil
}

// seedSourceText says where the seed came from, for the stderr line.
func (f *trainFlags) seedSourceText() string {
	switch f.seedSource {
	case "given":
		return "given with --seed: a reproducible research run"
	case "checkpoint":
		return "from the checkpoint"
	}
	return "drawn from the operating system; --seed reproduces the run"
}

// epochJSON is one epoch in the --json history. The fields computed from the training data
// without privacy (pointers) appear only with --private-stats.
type epochJSON struct {
	Epoch   int      `json:"epoch"`
	Steps   int      `json:"steps"`
	TestAcc float64  `json:"test_accuracy"`
	Epsilon *float64 `json:"epsilon"` // 0 for a non-private run; null where no finite ε exists at δ
	Seconds float64  `json:"seconds"`

	TrainLoss     *float64 `json:"train_loss,omitempty"` // null-free: a non-finite mean is left out, as are the next two
	TrainAcc      *float64 `json:"train_accuracy,omitempty"`
	ClippedFrac   *float64 `json:"clipped_fraction,omitempty"`
	Examples      *int     `json:"examples,omitempty"`
	NonFinite     *int     `json:"non_finite_examples,omitempty"`
	NonFiniteLoss *int     `json:"non_finite_loss_steps,omitempty"`
}

// epochsJSON converts the engine's history of epochs of perEpoch steps, keeping the non-private
// statistics only when privateStats is set; a mean that is NaN (epochMeans) is left out.
func epochsJSON(h []engine.EpochStats, perEpoch int, privateStats bool) []epochJSON {
	out := make([]epochJSON, len(h))
	for i, e := range h {
		o := epochJSON{Epoch: e.Epoch, Steps: e.Steps, TestAcc: e.TestAcc, Seconds: e.Seconds}
		switch eps := e.Epsilon; {
		case math.IsNaN(eps):
			o.Epsilon = new(float64)
		case !math.IsInf(eps, 0):
			o.Epsilon = &eps
		}
		if privateStats {
			e := e
			loss, acc, clipped := epochMeans(e, perEpoch)
			o.TrainLoss, o.TrainAcc, o.ClippedFrac = num(loss), num(acc), num(clipped)
			o.Examples, o.NonFinite, o.NonFiniteLoss = &e.ExamplesSeen, &e.NonFinite, &e.NonFiniteLoss
		}
		out[i] = o
	}
	return out
}

// notCovered lists the JSON values the guarantee does not cover: the test accuracy (the test
// split is not protected), the wall-clock times (a step's time grows with its realized batch
// size, part of the sampler's secret randomness), and with --private-stats the statistics of
// the training data.
func notCovered(privateStats bool) []string {
	out := []string{"test_accuracy", "history[].test_accuracy", "seconds", "history[].seconds", "examples_per_second"}
	if privateStats {
		out = append(out, "non_finite_examples", "non_finite_loss_steps", "history[].train_loss", "history[].train_accuracy", "history[].clipped_fraction",
			"history[].examples", "history[].non_finite_examples", "history[].non_finite_loss_steps")
	}
	return out
}

// calibration runs train's σ search: it says on w (nil: silent) what it is doing within a
// second of starting and at most about once a second after that, and stops when ctx is done.
type calibration struct {
	ctx context.Context
	w   io.Writer
}

// solve returns the σ whose accountant (spec) meets budget after steps steps.
func (c calibration) solve(spec accounting.Spec, steps int, budget privacy.Budget) (float64, error) {
	ctx := c.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if c.w == nil {
		return accounting.SolveSigmaCtx(ctx, spec, steps, budget, 0, nil)
	}
	fmt.Fprintf(c.w, "dpsgd train: calibrating σ to ε = %g at δ = %g over %d steps (accountant %s; Ctrl-C stops)\n",
		budget.Epsilon, budget.Delta, steps, spec.Method)
	var last time.Duration
	var probes int
	sigma, err := accounting.SolveSigmaCtx(ctx, spec, steps, budget, 0, func(p accounting.Probe) {
		probes = max(probes, p.N)
		if p.Elapsed-last < time.Second {
			return
		}
		last = p.Elapsed
		fmt.Fprintf(c.w, "dpsgd train: calibrating σ: %d probes, σ in [%.5g, %.5g] (%.0f s)\n", probes, p.Lo, p.Hi, p.Elapsed.Seconds())
	})
	if err == nil && last > 0 {
		fmt.Fprintf(c.w, "dpsgd train: calibrated σ = %.6g in %d probes\n", sigma, probes)
	}
	return sigma, err
}
