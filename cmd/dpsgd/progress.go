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

// progress shows a bar on a terminal, one line per epoch otherwise, nothing with --quiet.
type progress struct {
	w        io.Writer
	bar      *progressbar.ProgressBar
	perEpoch int
	epochs   int
	lastEps  float64
}

func newProgress(w io.Writer, quiet bool, perEpoch, epochs int) engine.Progress {
	if quiet {
		return engine.NopProgress{}
	}
	p := &progress{w: w, perEpoch: perEpoch, epochs: epochs, lastEps: math.NaN()}
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
	loss := math.NaN()
	if st.BatchSize > 0 {
		loss = st.Loss / float64(st.BatchSize)
	}
	epoch := (step-1)/p.perEpoch + 1
	p.bar.Describe(fmt.Sprintf("epoch %d/%d loss %.3f ε %s", epoch, p.epochs, loss, fmtEps(p.lastEps)))
	_ = p.bar.Add(1)
}

func (p *progress) Epoch(e engine.EpochStats) {
	p.lastEps = e.Epsilon
	line := fmt.Sprintf("epoch %3d  loss %.4f  train acc %.4f  test acc %.4f  ε %s  clipped %.0f%%  %.1fs",
		e.Epoch, e.TrainLoss, e.TrainAcc, e.TestAcc, fmtEps(e.Epsilon), 100*e.ClippedFrac, e.Seconds)
	if e.NonFinite > 0 {
		line += fmt.Sprintf("  non-finite %d", e.NonFinite)
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

func fmtEps(e float64) string {
	if math.IsNaN(e) {
		return "-"
	}
	return fmt.Sprintf("%.3f", e)
}
