package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/dpsgd/dpsgd/datasets"
	"github.com/dpsgd/dpsgd/internal/seedmix"
	"github.com/dpsgd/dpsgd/kernels"
)

// Augmentation multiplicity (Config.AugMult; docs/privacy-math.md, "Augmentation
// multiplicity"): each example a step draws becomes K views of itself, each an augmentation of
// the record (Augment: a random translation with zero padding, an optional horizontal flip)
// drawn from the stream (seed, step, example, view). The example's gradient is the mean over
// its views, ḡᵢ = (1/K)·Σ_k g_{i,k}, materialized exactly and clipped as one vector,
// cᵢ = min(1, C′/‖ḡᵢ‖) (De, Berrada, Hayes, Smith & Balle 2022, "Unlocking High-Accuracy
// Differentially Private Image Classification through Scale"; Sander, Stock & Sablayrolles
// 2023, "TAN Without a Burn: Scaling Laws of DP-SGD"). The views are a function of the one
// record (and of public values: the seed, the step, the record's index, the view), so the
// example still moves the step's sum by ‖cᵢ·ḡᵢ‖ ≤ C and the accounting is the record-level
// one, unchanged.
//
// The step is the user-level step's (users.go) with the group an example's K views: the
// sampler's draw becomes K rows per example, grouped by example, whole groups per physical
// batch (a physical batch of P rows takes ⌊P/K⌋ examples), the group's gradient summed by
// userGrad and scaled by 1/K before its norm is taken. Every view is augmented, view 0 too
// (as De et al.). Evaluation never augments.

// MaxAugMult is the largest augmentation multiplicity Config.AugMult takes.
const MaxAugMult = 64

// Augment is the augmentation of an image's views, for images in the row-major [C, H, W]
// layout (the training set's Shape). The zero value is no augmentation.
type Augment struct {
	// Pad translates the image by up to Pad pixels in each direction, the vacated pixels zero:
	// a crop, at an offset uniform in [0, 2·Pad]², of the image padded by Pad zeros on every
	// side (MNIST: 2, CIFAR-10: 4). In [0, min(H, W)].
	Pad int
	// Flip mirrors the image left–right with probability 1/2 (after the crop).
	Flip bool
}

// augmenting reports whether the configuration runs the augmented step: K > 1 or an
// augmentation.
func (c *Config) augmenting() bool {
	return c.AugMult > 1 || c.Augment != (Augment{})
}

// validateAugMult checks AugMult (0 becomes 1) and Augment against the rest of c.
func (c *Config) validateAugMult() error {
	if c.AugMult == 0 {
		c.AugMult = 1
	}
	if c.AugMult < 1 || c.AugMult > MaxAugMult {
		return fmt.Errorf("augmentation multiplicity %d: want a value in [1, %d]", c.AugMult, MaxAugMult)
	}
	if c.Augment.Pad < 0 {
		return fmt.Errorf("augment pad %d: want ≥ 0", c.Augment.Pad)
	}
	if !c.augmenting() {
		return nil
	}
	if c.AugMult > c.PhysicalBatch {
		return fmt.Errorf("augmentation multiplicity %d: want at most the physical batch %d (an example's views run in one physical batch)", c.AugMult, c.PhysicalBatch)
	}
	if c.UserLevel {
		return errors.New("augmentation multiplicity with a user-level run: not supported (the user path clips a user's summed records; use one or the other)")
	}
	if c.Checkpoint.active() {
		return errors.New("checkpoints of an augmented run (augmentation multiplicity or augment) are not supported: the checkpoint does not record them; run without checkpoints")
	}
	return nil
}

// augmenter draws and applies the views of one run's examples.
type augmenter struct {
	k       int
	aug     Augment
	c, h, w int
	seed    uint64
}

// domainAugment keeps the views' streams apart from every other use of the seed.
const domainAugment uint64 = 0x6175676d656e74 // "augment"

// newAugmenter makes the views of cfg's run on images of train's Shape (checkAugment has
// checked it).
func newAugmenter(cfg *Config, train *datasets.Dataset, seed uint64) *augmenter {
	in := train.Shape
	return &augmenter{k: cfg.AugMult, aug: cfg.Augment, c: in[0], h: in[1], w: in[2], seed: seed}
}

// draw returns view view of example example at global step step: the translation (dy, dx),
// each in [−Pad, Pad], and whether it flips. It depends on the seed, the step, the example
// and the view alone.
func (a *augmenter) draw(step, example, view int) (dy, dx int, flip bool) {
	s := seedmix.Mix(seedmix.Mix(seedmix.Mix(a.seed^domainAugment, uint64(step)), uint64(example)), uint64(view))
	r := rand.New(rand.NewPCG(s, seedmix.Next(s)))
	if p := a.aug.Pad; p > 0 {
		dy, dx = r.IntN(2*p+1)-p, r.IntN(2*p+1)-p
	}
	if a.aug.Flip {
		flip = r.IntN(2) == 1
	}
	return dy, dx, flip
}

// view writes into dst (C·H·W values) the image src translated by (dy, dx) and flipped:
// dst[c, y, x] = src[c, y+dy, x′+dx] with x′ = W−1−x when flipped (else x), and 0 where that
// falls outside the image.
func augmentView[T kernels.Float](dst []T, src []float32, c, h, w, dy, dx int, flip bool) {
	for ch := range c {
		for y := range h {
			d := dst[(ch*h+y)*w : (ch*h+y+1)*w]
			sy := y + dy
			if sy < 0 || sy >= h {
				clear(d)
				continue
			}
			s := src[(ch*h+sy)*w : (ch*h+sy+1)*w]
			for x := range w {
				sx := x + dx
				if flip {
					sx = w - 1 - x + dx
				}
				if sx < 0 || sx >= w {
					d[x] = 0
				} else {
					d[x] = T(s[sx])
				}
			}
		}
	}
}

// viewStep is what a step's physical batches need to make the views: the augmenter and the
// global step.
type viewStep struct {
	a    *augmenter
	step int
}

// fillViews overwrites the real rows of x (a physical batch filled from the dataset rows) with
// their views: row i, the v-th row of its group (gid), gets view v of example rows[i].
func fillViews[T kernels.Float](x []T, ds *datasets.Dataset, rows []int, mask []float64, gid []int, v *viewStep) {
	d := ds.D
	view := 0
	for i, idx := range rows {
		if mask[i] == 0 {
			continue
		}
		if i > 0 && mask[i-1] != 0 && gid[i-1] == gid[i] {
			view++
		} else {
			view = 0
		}
		dy, dx, flip := v.a.draw(v.step, idx, view)
		augmentView(x[i*d:(i+1)*d], ds.X[idx*d:(idx+1)*d], v.a.c, v.a.h, v.a.w, dy, dx, flip)
	}
}

// batch sets b to the groups of a step's examples idx: example j's K rows idx[j] at
// rows[j·K:(j+1)·K].
func (a *augmenter) batch(idx []int, b *userBatch) {
	b.rows, b.start = b.rows[:0], append(b.start[:0], 0)
	for _, i := range idx {
		for range a.k {
			b.rows = append(b.rows, i)
		}
		b.start = append(b.start, len(b.rows))
	}
}

// checkAugment checks an augmented run's training set: images ([C, H, W] Shape, whatever
// the model's input: an MLP sees the same pixels flattened) at least Pad pixels high and wide.
func checkAugment(cfg *Config, train *datasets.Dataset) error {
	sh := train.Shape
	if len(sh) != 3 || sh[0]*sh[1]*sh[2] != train.D {
		return fmt.Errorf("augmentation multiplicity %d, augment %+v: images only ([C, H, W] examples), the training set's examples have shape %v", cfg.AugMult, cfg.Augment, sh)
	}
	if h, w := sh[1], sh[2]; cfg.Augment.Pad > min(h, w) {
		return fmt.Errorf("augment pad %d: want a value in [0, %d] (the images are %d×%d)", cfg.Augment.Pad, min(h, w), h, w)
	}
	return nil
}
