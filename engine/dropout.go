package engine

import (
	"github.com/dpsgd/dpsgd/engine/nn"
	"github.com/dpsgd/dpsgd/internal/seedmix"
	"github.com/dpsgd/dpsgd/kernels"
)

// dropoutStream separates the dropout masks' seeds from the noise drawn from the same run key.
const dropoutStream = 0x64726f706f7574 // "dropout"

// dropoutStepSeed is the seed of one step's dropout masks: the run's noise key and the step,
// mixed on a stream of their own (the Gaussian noise reads the key's Philox streams, never
// these values). Each example's seed is then nn.DropoutSeed(step seed, its dataset index).
func dropoutStepSeed(key kernels.NoiseKey) uint64 {
	return seedmix.Mix(seedmix.Mix(key.Seed, dropoutStream), key.Step)
}

// setDropoutStep sets the step's dropout seed on every replica (CPU backend; stacks, the only
// models with dropout, do not run on CUDA).
func (b *cpuBackend[T]) setDropoutStep(key kernels.NoiseKey) {
	s := dropoutStepSeed(key)
	for _, r := range b.reps {
		r.dropStep = s
	}
}

// setDropoutSeeds gives each row of a physical batch the dropout seed of its dataset row, so
// that an example's masks depend on the step and its own index only (nn.Dropout says why).
func (r *replica[T]) setDropoutSeeds(rows []int) error {
	if !r.net.HasDropout() {
		return nil
	}
	if len(r.seeds) != len(rows) {
		r.seeds = make([]uint64, len(rows))
	}
	for i, idx := range rows {
		r.seeds[i] = nn.DropoutSeed(r.dropStep, idx)
	}
	return r.net.SetDropoutSeeds(r.seeds)
}
