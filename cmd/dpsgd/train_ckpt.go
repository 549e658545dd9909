package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/checkpoint"
	"github.com/dpsgd/dpsgd/engine/sampler"
)

// ckptNotStored are the flags a checkpoint does not record: they describe this invocation,
// not the run (--device and --blas included: a run checkpointed on a GPU may resume on the
// CPU, or on another BLAS, not bitwise, and the other way round; --allow-chance too: what this
// invocation's exit status says; --download: whether this invocation may fetch data).
// --checkpoint, --key-dir and --save are paths of this invocation: a checkpoint restored from
// a copy must never write over the file it was copied from, and where the keys are is this
// machine's business. --seed is sealed in the checkpoint under the run's secret instead
// (checkpoint.Config.Seeds): whoever knows a seeded run's seed can regenerate its noise.
var ckptNotStored = map[string]bool{"resume": true, "json": true, "quiet": true, "device": true, "blas": true,
	"checkpoint": true, "key-dir": true, "seed": true, "save": true, "allow-chance": true, "download": true}

// keyDir returns --key-dir ("" = the default key store).
func (f *trainFlags) keyDir() string {
	if fl := f.fs.Lookup("key-dir"); fl != nil {
		return fl.Value.String()
	}
	return ""
}

// ckptRunKey loads the key of the run of checkpoint ck from the key store: a resume needs it
// to check the data, to unseal the seed and to rebuild a secure sampler.
func (f *trainFlags) ckptRunKey(ck *checkpoint.Checkpoint) (*checkpoint.RunKey, error) {
	store, err := checkpoint.OpenKeyStore(f.keyDir())
	if err != nil {
		return nil, usagef("--resume %s: %v", f.resume, err)
	}
	k, err := store.Load(ck.Config.RunID)
	if err != nil {
		return nil, usagef("--resume %s: %v. The resume needs the run's key (it checks the data, and holds the seed or the "+
			"secure sampler's key): name the key store that holds it with --key-dir DIR (or %s), or copy its directory %s "+
			"there along with the checkpoint", f.resume, err, checkpoint.KeyDirEnv, ck.Config.RunID)
	}
	return k, nil
}

// ckptCheckFlags checks --checkpoint, --checkpoint-every and --secure.
func (f *trainFlags) ckptCheckFlags() error {
	if f.checkpointEvery < 0 {
		return usagef("--checkpoint-every %d: want ≥ 0", f.checkpointEvery)
	}
	if f.checkpointEvery > 0 && f.checkpoint == "" {
		return usagef("--checkpoint-every %d: needs --checkpoint PATH", f.checkpointEvery)
	}
	if f.secure {
		if f.set["seed"] {
			return usagef("--seed: --secure draws noise and batches from the operating system's generator and takes no seed")
		}
		if f.noise != engine.NoiseGaussian {
			return usagef("--noise %s with --secure: secure mode provides gaussian noise only", f.noise)
		}
		if f.nonPrivate {
			return usagef("--secure with --non-private: a non-private run has no noise to secure")
		}
	}
	return nil
}

// ckptLoadResume reads the --resume checkpoint (nil without --resume) and makes the flags it
// recorded the defaults of this invocation: a flag given on the command line wins, and the
// engine refuses the resume if it changes anything that affects privacy. A checkpoint that
// cannot be read is a usage error (exit 2) naming the problem.
func (f *trainFlags) ckptLoadResume() (*checkpoint.Checkpoint, error) {
	if f.resume == "" {
		return nil, nil
	}
	ck, err := checkpoint.Load(f.resume)
	if err != nil {
		return nil, usagef("--resume: %v", err)
	}
	f.fromCheckpoint = map[string]bool{}
	names := make([]string, 0, len(ck.Config.Meta))
	for name := range ck.Config.Meta {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if f.set[name] || ckptNotStored[name] {
			continue
		}
		if f.fs.Lookup(name) == nil {
			return nil, usagef("--resume %s: the checkpoint records flag --%s, which this build does not know", f.resume, name)
		}
		if err := f.fs.Set(name, ck.Config.Meta[name]); err != nil {
			return nil, usagef("--resume %s: the checkpoint's --%s=%q: %v", f.resume, name, ck.Config.Meta[name], err)
		}
		f.set[name] = true
		f.fromCheckpoint[name] = true
	}
	if ck.Config.Sampler.Secure && !f.secure {
		return nil, usagef("--resume %s: the checkpoint is of a --secure run; resume it with --secure", f.resume)
	}
	if f.secure && !ck.Config.Sampler.Secure {
		return nil, usagef("--secure: the checkpoint %s is of a seeded run, which cannot continue in secure mode", f.resume)
	}
	// Checkpoints go to the path named now: --checkpoint, or else the resumed file itself,
	// never a path recorded in the file (which, in a copy, would be the original's).
	if !f.set["checkpoint"] {
		f.checkpoint = f.resume
	}
	k, err := f.ckptRunKey(ck)
	if err != nil {
		return nil, err
	}
	if !f.secure {
		seed, _, err := ck.Config.Seeds(k)
		if err != nil {
			return nil, usagef("--resume %s: %v", f.resume, err)
		}
		if f.set["seed"] && f.seed != seed {
			return nil, usagef("--resume %s --seed %d: the checkpoint's run has another seed; a resume continues the run's own", f.resume, f.seed)
		}
		if !f.set["seed"] {
			f.seed = seed
			f.set["seed"], f.fromCheckpoint["seed"] = true, true
		}
	}
	return ck, nil
}

// ckptMeta records the run's flags: those given, plus the values resolved from presets or
// calibration (σ, the budget, the ball radius, the epochs), so that a resume rebuilds the same
// run even when --epochs changes the calibration's horizon.
func (f *trainFlags) ckptMeta(rc *runConfig) map[string]string {
	meta := map[string]string{}
	for name := range f.set {
		if ckptNotStored[name] {
			continue
		}
		meta[name] = f.fs.Lookup(name).Value.String()
	}
	meta["epochs"] = strconv.Itoa(f.epochs)
	if rc.cfg.NonPrivate {
		return meta
	}
	if rc.priv.Budget != nil && rc.cfg.Noise != engine.NoiseBall {
		meta["target-epsilon"] = strconv.FormatFloat(rc.priv.Budget.Epsilon, 'g', -1, 64)
	}
	if rc.cfg.Noise == engine.NoiseBall {
		meta["radius"] = strconv.FormatFloat(ckptRadiusFlag(rc.cfg.Radius, rc.cfg.Clip), 'g', -1, 64)
	} else {
		meta["sigma"] = strconv.FormatFloat(rc.cfg.Sigma, 'g', -1, 64)
	}
	return meta
}

// ckptRadiusFlag returns a --radius value r with r·clip == radius exactly when a float near
// radius/clip has that property (the flag is a multiple of --clip).
func ckptRadiusFlag(radius, clip float64) float64 {
	r := radius / clip
	for _, c := range []float64{r, math.Nextafter(r, math.Inf(1)), math.Nextafter(r, 0)} {
		if c*clip == radius {
			return c
		}
	}
	return r
}

// ckptRun returns the run key of this invocation: the resumed run's, a new one in the key
// store for a secure run that writes checkpoints, or nil.
func (f *trainFlags) ckptRun(resumeFrom *checkpoint.Checkpoint) (*checkpoint.RunKey, error) {
	if resumeFrom != nil {
		return f.ckptRunKey(resumeFrom)
	}
	if !f.secure || f.checkpoint == "" {
		return nil, nil
	}
	store, err := checkpoint.OpenKeyStore(f.keyDir())
	if err != nil {
		return nil, usagef("--key-dir: %v", err)
	}
	if store.Holds(f.checkpoint) {
		return nil, usagef("--checkpoint %s is inside the key store %s: whoever gets the one would get the other; keep the key store elsewhere (--key-dir)", f.checkpoint, store.Dir())
	}
	return store.NewRun()
}

// ckptSamplerKey returns the secure sampler's key source (dpsgd.Options.SamplerKey). A
// checkpointed secure run's sampler key is derived from its run key
// (checkpoint.RunKey.SamplerKey: a new run in the key store, or the resumed one's), so it is
// stored nowhere; a secure run without checkpoints draws one from the operating system. The
// front door calls it once the rest of the plan is resolved, so a new run enters the key
// store only when it starts; the run key goes to rc.run.
func (f *trainFlags) ckptSamplerKey(rc *runConfig, resumeFrom *checkpoint.Checkpoint) func() ([32]byte, error) {
	return func() ([32]byte, error) {
		run, err := f.ckptRun(resumeFrom)
		if err != nil {
			return [32]byte{}, err
		}
		if rc.run = run; run == nil {
			return sampler.NewSecureKey()
		}
		return run.SamplerKey(), nil
	}
}

// ckptWire sets the run's checkpoint options (the secure sampler is the front door's, keyed
// by ckptSamplerKey).
func (f *trainFlags) ckptWire(rc *runConfig, resumeFrom *checkpoint.Checkpoint) error {
	if rc.run == nil {
		var err error
		if rc.run, err = f.ckptRun(resumeFrom); err != nil {
			return err
		}
	}
	if resumeFrom != nil {
		m := rc.priv.Sampler.StepsPerEpoch()
		if resumeFrom.State.Step > f.epochs*m {
			return usagef("--epochs %d: the checkpoint %s is at step %d (%d epochs of %d steps done); want a total of at least %d epochs",
				f.epochs, f.resume, resumeFrom.State.Step, resumeFrom.State.Step/m, m, (resumeFrom.State.Step+m-1)/m)
		}
	}
	rc.cfg.Checkpoint = engine.CheckpointOptions{Path: f.checkpoint, Every: f.checkpointEvery, Resume: resumeFrom,
		SamplerSeed: f.seed, Meta: f.ckptMeta(rc), KeyDir: f.keyDir(), Run: rc.run}
	return nil
}

// ckptClassify makes the checkpoint errors (unreadable, of another configuration, not
// writable, without its key, of a stale generation) usage errors: exit status 2 with the
// message naming the problem.
func ckptClassify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, checkpoint.ErrFormat) || errors.Is(err, checkpoint.ErrMismatch) || errors.Is(err, checkpoint.ErrWrite) ||
		errors.Is(err, checkpoint.ErrKeyStore) || errors.Is(err, checkpoint.ErrStale) {
		return usageError{err}
	}
	return err
}

// ckptFillJSON adds the checkpoint, guard and secure-mode keys to the JSON result.
func ckptFillJSON(out *trainJSON, f *trainFlags, rc *runConfig, res *engine.Result) {
	if res.ResumedFromStep >= 0 {
		s := res.ResumedFromStep
		out.ResumedFromStep = &s
	}
	out.Checkpoint = f.checkpoint
	out.CheckpointsWritten = res.Checkpoints
	if res.LastCheckpointStep >= 0 {
		s := res.LastCheckpointStep
		out.LastCheckpointStep = &s
	}
	out.Diverged = res.Diverged
	if res.Diverged {
		s := res.DivergedAt
		out.DivergedAtStep = &s
	}
	out.Secure = rc.cfg.Secure
	out.ParamsDigest = res.ParamsDigest
	if rc.cfg.Secure {
		out.Seed = 0 // no seed: the noise and the batches come from the OS
	}
}

// ckptSummary prints the checkpoint and guard lines of the human summary.
func ckptSummary(w io.Writer, out trainJSON) {
	if out.ResumedFromStep != nil {
		fmt.Fprintf(w, "resumed from step %d\n", *out.ResumedFromStep)
	}
	if out.Checkpoint != "" {
		if out.LastCheckpointStep != nil {
			fmt.Fprintf(w, "checkpoint: %s (step %d, %d written)\n", out.Checkpoint, *out.LastCheckpointStep, out.CheckpointsWritten)
		} else {
			fmt.Fprintf(w, "checkpoint: %s (none written)\n", out.Checkpoint)
		}
	}
	if out.NonFiniteLoss != nil && *out.NonFiniteLoss > 0 {
		fmt.Fprintf(w, "warning: %d steps had a non-finite loss (left out of the mean loss) %s\n", *out.NonFiniteLoss, notPrivateLabel)
	}
	if out.Diverged {
		fmt.Fprintf(w, "DIVERGED at step %d: the parameters or the loss became non-finite; training stopped\n", *out.DivergedAtStep)
	}
}

// resumeOutcome says, after the report, what a run did instead of what it was asked: a run the
// budget stopped before its first step is an error (exit 1: nothing the command was asked to
// do happened), and a resume the budget stopped says why its checkpoint's plan cannot go further;
// a resume of a run that already has its epochs says so. stop is budgetStop's line.
func (f *trainFlags) resumeOutcome(rc *runConfig, res *engine.Result, resumeFrom *checkpoint.Checkpoint, stop string, stderr io.Writer) error {
	start := max(res.ResumedFromStep, 0)
	if res.StoppedByBudget {
		why := ""
		if resumeFrom != nil {
			why = f.resumeBudgetWhy(rc, res, resumeFrom)
		}
		if res.Steps == start {
			if why != "" {
				why = ": " + why
			}
			return fmt.Errorf("%s; no step taken%s", stop, why)
		}
		if why != "" {
			fmt.Fprintf(stderr, "dpsgd: %s\n", why)
		}
		return nil
	}
	if resumeFrom != nil && res.Steps == start && !res.Interrupted {
		fmt.Fprintf(stderr, "dpsgd: nothing to train: the run of %s already has its %d epochs; --epochs N above %d extends it, as far as its budget allows\n",
			f.resume, f.epochs, f.epochs)
	}
	return nil
}

// resumeBudgetWhy explains why a resumed run cannot train further within its budget: a resume
// keeps the checkpoint's noise and budget, which its first invocation fixed for the epochs it
// planned, and may not change them.
func (f *trainFlags) resumeBudgetWhy(rc *runConfig, res *engine.Result, resumeFrom *checkpoint.Checkpoint) string {
	noise := fmt.Sprintf("σ = %.4g", rc.cfg.Sigma)
	budget := fmt.Sprintf("ε = %g at δ = %g", rc.priv.Budget.Epsilon, rc.priv.Budget.Delta)
	if rc.cfg.Noise == engine.NoiseBall {
		noise = fmt.Sprintf("ball radius R = %.4g", rc.cfg.Radius)
		budget = fmt.Sprintf("δ = %g", rc.priv.Budget.Delta)
	}
	planned := ""
	if e := resumeFrom.Config.Meta["epochs"]; e != "" {
		planned = fmt.Sprintf(" (the checkpoint was written by a run of --epochs %s)", e)
	}
	return fmt.Sprintf("a resume keeps the checkpoint's %s and budget %s%s and may not change anything that affects privacy "+
		"(docs/reliability.md), so this run cannot go past epoch %d of the %d asked. To train %d epochs within %s, start a new run with --epochs %d "+
		"and no --sigma or --radius: the noise is then calibrated to the budget over those epochs",
		noise, budget, planned, res.EpochsRun, f.epochs, f.epochs, budget, f.epochs)
}
