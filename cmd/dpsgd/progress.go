package main

import (
	"fmt"
	"io"
	"math"
	"os"

	"github.com/dpsgd/dpsgd/engine"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows a bar on a terminal, one line per epoch otherwise, nothing with --quiet. By
// default it shows only what the guarantee covers or what is public (ε, test accuracy, time);
// with private set (--private-stats) also the training statistics, labelled as not private.
type progress struct {
	w        io.Writer
	bar      *progressbar.ProgressBar
	perEpoch int
	epochs   int
	lastEps  float64
	// private shows the statistics computed from the training data without privacy (loss,
	// train accuracy, clipped fraction, non-finite count), labelled as such.
	private bool
}

func newProgress(w io.Writer, quiet, private bool, perEpoch, epochs int) engine.Progress {
	if quiet {
		return engine.NopProgress{}
	}
	p := &progress{w: w, perEpoch: perEpoch, epochs: epochs, lastEps: math.NaN(), private: private}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(perEpoch*epochs,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("training"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetItsString("steps"),
			progressbar.OptionShowIts(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100_000_000),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

func (p *progress) Start(int) {}

func (p *progress) Step(step int, st engine.StepStats, eps float64) {
	if p.bar == nil {
		return
	}
	epoch := (step-1)/p.perEpoch + 1
	desc := fmt.Sprintf("epoch %d/%d ε %s", epoch, p.epochs, fmtEps(p.lastEps))
	if p.private && st.BatchSize > 0 {
		desc += fmt.Sprintf(" [not private: loss %.3f]", st.Loss/float64(st.BatchSize))
	}
	p.bar.Describe(desc)
	_ = p.bar.Add(1)
}

func (p *progress) Epoch(e engine.EpochStats) {
	p.lastEps = e.Epsilon
	line := fmt.Sprintf("epoch %3d  test acc %.4f  ε %s  %.1fs", e.Epoch, e.TestAcc, fmtEps(e.Epsilon), e.Seconds)
	if p.private {
		loss, acc, clipped := epochMeans(e, p.perEpoch)
		line += fmt.Sprintf("  [not private: loss %.4f  train acc %.4f  clipped %.0f%%  non-finite %d]",
			loss, acc, 100*clipped, e.NonFinite)
	}
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	fmt.Fprintln(p.w, line)
}

func (p *progress) Finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// epochMeans returns an epoch's mean training loss, training accuracy and clipped fraction as
// shown, for an epoch of perEpoch steps: NaN where nothing counted. The engine leaves a
// non-finite loss out of the loss sum, and an example with a non-finite gradient out of the loss
// and accuracy sums, and divides by the examples drawn, so an epoch whose every step's loss was
// non-finite, or whose every example was, or that drew no example, comes back as 0: such a mean
// is NaN (printed NaN, left out of the JSON), never a 0 that looks like a perfect loss.
func epochMeans(e engine.EpochStats, perEpoch int) (loss, acc, clipped float64) {
	loss, acc, clipped = e.TrainLoss, e.TrainAcc, e.ClippedFrac
	if e.ExamplesSeen == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	if e.NonFinite >= e.ExamplesSeen {
		loss, acc = math.NaN(), math.NaN()
	}
	if perEpoch > 0 && e.NonFiniteLoss >= perEpoch {
		loss = math.NaN()
	}
	return loss, acc, clipped
}

func fmtEps(e float64) string {
	if math.IsNaN(e) {
		return "-"
	}
	return fmt.Sprintf("%.3f", e)
}
