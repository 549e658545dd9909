package main

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/privacy/ball"
)

// TestTrainBallAtChanceExits1: `--noise ball` with its defaults learns nothing (the calibrated
// radius swamps the gradient): the command warns before training with the δ that would make
// learning possible, still prints the guarantee and the JSON, and then exits 1 saying why on
// stderr; --allow-chance makes the same run exit 0.
func TestTrainBallAtChanceExits1(t *testing.T) {
	// The physical batch of 256 keeps the run whose chance-level accuracy this test was
	// written for: the noise-swamped model's test accuracy is at chance, but where within the
	// chance band depends on the bits (with the default of 152 rows it lands at 0.1106, just
	// over the band's 0.1085).
	args := []string{"train", "--noise", "ball", "--epochs", "1", "--seed", "1", "--physical-batch", "256", "--json"}
	code, out, errOut := runCmd(t, args...)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (at chance): %s", code, errOut)
	}
	m := lastJSON(t, out)
	acc := m["test_accuracy"].(float64)
	if !strings.Contains(out, "privacy: (0, δ = 1e-05)-DP") || m["epsilon"] != 0.0 || m["delta_spent"] == nil || m["steps"].(float64) < 1 {
		t.Errorf("the report before the exit lacks the guarantee: %v", m)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	last := lines[len(lines)-1]
	level := chanceLevel(10, 5000)
	for _, want := range []string{"dpsgd train: the run learned nothing usable", strconv.FormatFloat(acc, 'f', 4, 64), "10 classes",
		"5000 test examples", strconv.FormatFloat(level, 'f', 4, 64), "not part of the privacy guarantee", "--allow-chance"} {
		if !strings.Contains(last, want) {
			t.Errorf("last stderr line %q lacks %q", last, want)
		}
	}
	if !(acc <= level) {
		t.Errorf("accuracy %v above the chance level %v, yet refused", acc, level)
	}
	// The warning before training, and the δ it names: an oracle from privacy/ball's own step δ
	// and exact composition at the radius B·C·√T (Poisson: T steps, each q·δ_step).
	warn := ""
	for _, l := range lines {
		if strings.HasPrefix(l, "dpsgd: warning: --noise ball:") {
			warn = l
		}
	}
	if warn == "" || strings.Index(errOut, warn) > strings.Index(errOut, "epoch   1") {
		t.Fatalf("no ball warning before the first epoch line:\n%s", errOut)
	}
	mt := regexp.MustCompile(`--delta ([0-9.e-]+) would calibrate R to`).FindStringSubmatch(warn)
	if mt == nil {
		t.Fatalf("warning names no --delta: %q", warn)
	}
	suggested, _ := strconv.ParseFloat(mt[1], 64)
	const n, b = 20000, 256
	steps := int(m["steps"].(float64))
	edge := b * 1 * math.Sqrt(float64(steps))
	stepDelta, err := ball.StepDelta(int(m["params"].(float64)), 1, edge)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ball.ComposeExact(float64(b)/n*stepDelta, steps)
	if err != nil {
		t.Fatal(err)
	}
	if !(suggested >= want && suggested <= want*1.01) {
		t.Errorf("suggested --delta %v, want %v rounded up to 3 digits", suggested, want)
	}
	// The suggested δ brings the radius down to the edge: no warning any more.
	code, out, errOut = runCmd(t, "train", "--noise", "ball", "--epochs", "1", "--seed", "1", "--json", "--allow-chance", "--delta", mt[1])
	if code != 0 || strings.Contains(errOut, "swamps") {
		t.Fatalf("--delta %s: exit %d: %s", mt[1], code, errOut)
	}
	if r := lastJSON(t, out)["radius"].(float64); !(r <= edge) {
		t.Errorf("--delta %s: radius %v above the edge B·C·√T = %v", mt[1], r, edge)
	}
	// --allow-chance: the same refused run exits 0.
	code, out, errOut = runCmd(t, append(args, "--allow-chance")...)
	if code != 0 || strings.Contains(errOut, "learned nothing") || lastJSON(t, out)["test_accuracy"] != acc {
		t.Errorf("--allow-chance: exit %d: %s", code, errOut)
	}
}

// TestChanceLevelFalseAlarms: chanceLevel flags a classifier that learned nothing and lets one
// that learned pass: simulated test sets of n examples, K classes, scored by a label-independent
// guesser (each answer right with probability 1/K) rise above the level about 2.3% of the time
// (2 standard errors), and a classifier 6 standard errors above chance falls to it well under 1%.
func TestChanceLevelFalseAlarms(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ k, n int }{{10, 500}, {2, 300}, {4, 1000}} {
		p := 1 / float64(c.k)
		level := chanceLevel(c.k, c.n)
		se := math.Sqrt(p * (1 - p) / float64(c.n))
		const trials = 4000
		above, below := 0, 0
		for range trials {
			guess, learned := 0, 0
			for range c.n {
				u := rng.Float64()
				if u < p {
					guess++
				}
				if u < p+6*se {
					learned++
				}
			}
			if float64(guess)/float64(c.n) > level {
				above++
			}
			if float64(learned)/float64(c.n) <= level {
				below++
			}
		}
		if above > trials/25 || below > trials/100 {
			t.Errorf("K = %d, n = %d: a chance classifier passed %d/%d times, a learned one was refused %d/%d times", c.k, c.n, above, trials, below, trials)
		}
	}
}

// TestUsableNonFinite: with the training statistics released (--private-stats) or nothing to
// protect (--non-private), a run whose loss was non-finite at most steps, or whose examples had
// non-finite gradients mostly, is refused whatever its accuracy; without them those counts are
// not read (they are statistics of the training data outside the guarantee).
func TestUsableNonFinite(t *testing.T) {
	hist := []engine.EpochStats{{Epoch: 1, Steps: 10, ExamplesSeen: 1000}}
	good := func() *engine.Result {
		return &engine.Result{TestAccuracy: 0.9, EpochsRun: 1, Steps: 10, History: hist}
	}
	for _, c := range []struct {
		name       string
		flags      trainFlags
		edit       func(*engine.Result)
		want       string // "" = usable
		classes, n int
	}{
		{"fine", trainFlags{privateStats: true}, func(*engine.Result) {}, "", 10, 1000},
		{"loss at 6 of 10", trainFlags{privateStats: true}, func(r *engine.Result) { r.NonFiniteLoss = 6 }, "not finite at 6 of its 10 steps", 10, 1000},
		{"loss at 5 of 10", trainFlags{privateStats: true}, func(r *engine.Result) { r.NonFiniteLoss = 5 }, "", 10, 1000},
		{"non-private", trainFlags{nonPrivate: true}, func(r *engine.Result) { r.NonFiniteLoss = 10 }, "not finite at 10", 10, 1000},
		{"examples", trainFlags{privateStats: true}, func(r *engine.Result) { r.NonFinite = 501 }, "501 of the 1000 examples", 10, 1000},
		{"counts unread", trainFlags{}, func(r *engine.Result) { r.NonFiniteLoss, r.NonFinite = 10, 1000 }, "", 10, 1000},
		{"chance", trainFlags{}, func(r *engine.Result) { r.TestAccuracy = 0.11 }, "at chance for 10 classes", 10, 1000},
		{"NaN accuracy", trainFlags{}, func(r *engine.Result) { r.TestAccuracy = math.NaN() }, "at chance", 10, 1000},
		{"allowed", trainFlags{allowChance: true, privateStats: true}, func(r *engine.Result) { r.TestAccuracy, r.NonFiniteLoss = 0, 10 }, "", 10, 1000},
		{"no epoch", trainFlags{}, func(r *engine.Result) { r.TestAccuracy, r.EpochsRun = 0, 0 }, "", 10, 1000},
		{"no test set", trainFlags{}, func(r *engine.Result) { r.TestAccuracy = 0 }, "", 10, 0},
	} {
		res := good()
		c.edit(res)
		err := c.flags.usable(res, c.classes, c.n, "")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want usable", c.name, err)
		case c.want != "" && (!errors.Is(err, errUnusable) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want errUnusable naming %q", c.name, err, c.want)
		}
	}
}

// TestEpochLinesShowNaN: an epoch whose every step had a non-finite loss, or whose every
// example had a non-finite gradient, has no mean loss: the epoch line says NaN (not the 0.0000
// the engine's sums leave), and the JSON leaves the value out.
func TestEpochLinesShowNaN(t *testing.T) {
	const perEpoch = 4
	for _, c := range []struct {
		name string
		e    engine.EpochStats
		want []string
	}{
		{"loss", engine.EpochStats{Epoch: 1, Steps: perEpoch, ExamplesSeen: 100, NonFiniteLoss: perEpoch, TrainAcc: 0.5, ClippedFrac: 1}, []string{"loss NaN", "train acc 0.5000"}},
		{"examples", engine.EpochStats{Epoch: 1, Steps: perEpoch, ExamplesSeen: 100, NonFinite: 100, ClippedFrac: 0}, []string{"loss NaN", "train acc NaN", "non-finite 100"}},
		{"nothing drawn", engine.EpochStats{Epoch: 1, Steps: perEpoch}, []string{"loss NaN", "train acc NaN", "clipped NaN%"}},
		{"finite", engine.EpochStats{Epoch: 1, Steps: perEpoch, ExamplesSeen: 100, NonFiniteLoss: perEpoch - 1, TrainLoss: 0.25, TrainAcc: 0.5}, []string{"loss 0.2500"}},
	} {
		var buf bytes.Buffer
		p := newProgress(&buf, false, true, perEpoch, 1)
		p.Epoch(c.e)
		for _, w := range c.want {
			if !strings.Contains(buf.String(), w) {
				t.Errorf("%s: line %q lacks %q", c.name, buf.String(), w)
			}
		}
		js := epochsJSON([]engine.EpochStats{c.e}, perEpoch, true)[0]
		if strings.Contains(c.want[0], "NaN") && js.TrainLoss != nil {
			t.Errorf("%s: JSON train_loss %v, want it left out", c.name, *js.TrainLoss)
		}
	}
}
