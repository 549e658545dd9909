package main

import (
	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/engine"
	"github.com/spf13/pflag"
)

// augFlags are dpsgd train's augmentation multiplicity flags (engine.Config.AugMult and
// Augment; docs/privacy-math.md, "Augmentation multiplicity").
type augFlags struct {
	k    int  // --augmult
	pad  int  // --augment-pad
	flip bool // --augment-flip
}

func (a *augFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&a.k, "augmult", 1, "augmentation multiplicity K in [1, 64]: each sampled image runs as K augmented views (random translation by up to --augment-pad pixels with zero padding, flips with --augment-flip; every view augmented) and the mean of their gradients is clipped as the example's gradient; the guarantee is unchanged (record-level). Image data only; CPU only; no checkpoints. 1: off")
	fs.IntVar(&a.pad, "augment-pad", 0, "--augmult: translate each view by up to this many pixels in each direction, zero-padded (default 2 for mnist, 4 for cifar10, 0 otherwise)")
	fs.BoolVar(&a.flip, "augment-flip", false, "--augmult: mirror each view left-right with probability 1/2 (default on for cifar10, off otherwise; --augment-flip=false turns it off)")
}

// augDefaults are the dataset's default translation and flip for its views.
func augDefaults(dataset string) (pad int, flip bool) {
	switch dataset {
	case "mnist":
		return 2, false
	case "cifar10":
		return 4, true
	}
	return 0, false
}

// apply checks the flags against the training set and physical batch and sets cfg's
// AugMult and Augment. set says which flags were given.
func (a *augFlags) apply(cfg *engine.Config, set map[string]bool, dataset string, train *datasets.Dataset, userLevel bool, checkpoint bool) error {
	if a.k < 1 || a.k > engine.MaxAugMult {
		return usagef("--augmult %d: want a value in [1, %d]", a.k, engine.MaxAugMult)
	}
	if a.k == 1 {
		for _, name := range []string{"augment-pad", "augment-flip"} {
			if set[name] {
				return usagef("--%s: for an augmented run (--augmult K, K ≥ 2)", name)
			}
		}
		return nil
	}
	pad, flip := augDefaults(dataset)
	if set["augment-pad"] {
		pad = a.pad
	}
	if set["augment-flip"] {
		flip = a.flip
	}
	switch {
	case len(train.Shape) != 3:
		return usagef("--augmult %d: for image data ([C, H, W] examples); the training set's examples have shape %v", a.k, train.Shape)
	case pad < 0 || pad > min(train.Shape[1], train.Shape[2]):
		return usagef("--augment-pad %d: want a value in [0, %d] (the images are %d×%d)", pad, min(train.Shape[1], train.Shape[2]), train.Shape[1], train.Shape[2])
	case a.k > cfg.PhysicalBatch:
		return usagef("--augmult %d: want at most --physical-batch %d (an example's views run in one physical batch)", a.k, cfg.PhysicalBatch)
	case userLevel:
		return usagef("--augmult %d with --user-column: not supported (give one of them)", a.k)
	case checkpoint:
		return usagef("--augmult %d with --checkpoint or --resume: checkpoints of augmented runs are not supported", a.k)
	}
	cfg.AugMult, cfg.Augment = a.k, engine.Augment{Pad: pad, Flip: flip}
	return nil
}
