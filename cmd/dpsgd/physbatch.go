package main

import (
	"math"
	"runtime"
	"strconv"

	"github.com/dpsgd/dpsgd/engine"
	"github.com/dpsgd/dpsgd/engine/checkpoint"
	"github.com/dpsgd/dpsgd/privacy"
)

// maxDefaultPhysBatch is the most rows the default physical batch gives a compiled graph.
const maxDefaultPhysBatch = 256

// minDefaultPhysBatch is the fewest: below it a graph run's fixed costs outweigh what one
// more replica gains.
const minDefaultPhysBatch = 32

// defaultPhysBatch returns the physical batch `dpsgd train` uses on the CPU when
// --physical-batch is not given: the logical batch is cut into k physical batches of
// ⌈hi/k⌉ rows, k the smallest multiple of the replicas with ⌈hi/k⌉ ≤ 256 (fewer when the
// rows would drop below 32), where hi is the batch the rows must hold: the batch size for
// shuffling, whose batches are all of that size, and b + ⌈3√b⌉ for the samplers whose batch
// sizes vary around b (Poisson, truncated Poisson, random allocation; their standard
// deviation is at most √b), so that nearly every step fills the replicas once and no more:
// a batch of 256 with a physical batch of 256 ran on one replica and left the others idle,
// and one of 1,024 + 1 took a third round on two.
//
// The physical batch groups the float64 clipped sums, so it decides the result's bits:
// train records it in the checkpoint, and a resume takes it from there.
func defaultPhysBatch(batch, replicas int, fixedSize bool) int {
	if batch < 1 {
		return 1
	}
	if replicas < 1 {
		replicas = 1
	}
	hi := batch
	if !fixedSize {
		hi += int(math.Ceil(3 * math.Sqrt(float64(batch))))
	}
	rounds := (hi + replicas*maxDefaultPhysBatch - 1) / (replicas * maxDefaultPhysBatch)
	k := rounds * replicas
	k = min(k, max(1, hi/minDefaultPhysBatch))
	return (hi + k - 1) / k
}

// applyPhysBatch sets the run's physical batch when --physical-batch is not given: a resume
// takes the checkpoint's (the run's own, whatever this machine's replicas), a new run on the
// CPU defaultPhysBatch of its replicas, recorded in the checkpoint's flags; a run sent to the
// GPU (or to the GPU first under --device auto) keeps min(256, batch), which suits a device
// that runs one physical batch at a time.
func (f *trainFlags) applyPhysBatch(rc *runConfig, resumeFrom *checkpoint.Checkpoint) {
	if f.set["physical-batch"] {
		return
	}
	switch {
	case resumeFrom != nil:
		if resumeFrom.Config.PhysicalBatch > 0 {
			rc.cfg.PhysicalBatch = resumeFrom.Config.PhysicalBatch
		}
	case rc.cfg.UserLevel || rc.cfg.AugMult > 1:
		// A user-level step packs whole users and an augmented one K views per example into
		// the physical batches: the batch sizes them (cmd/dpsgd/train.go), not this rule.
	case rc.cfg.Device == engine.DeviceCPU:
		replicas := rc.cfg.Replicas
		if replicas == 0 {
			replicas = runtime.GOMAXPROCS(0)
		}
		rc.cfg.PhysicalBatch = defaultPhysBatch(f.batch, replicas, f.samplerName == privacy.SamplerShuffle)
	}
	if rc.cfg.Checkpoint.Meta != nil {
		rc.cfg.Checkpoint.Meta["physical-batch"] = strconv.Itoa(rc.cfg.PhysicalBatch)
	}
}
