package engine

import (
	"strings"
	"testing"

	"github.com/dpsgd/dpsgd/engine/nn"
	"gorgonia.org/tensor"
)

// TestConfigStepMemory: a model file within every per-layer limit whose step would hold
// hundreds of GiB (a convolution's per-example gradients of 2.6·10⁸ values each, at the
// default physical batch) is refused by Validate, naming the physical batch; the same model
// at physical batch 1 and the presets at large batches are accepted. StepValues counts
// what Plan declares: for a dense stack, each layer's output and its gradient plus the input.
func TestConfigStepMemory(t *testing.T) {
	huge, err := nn.ParseModelFile([]byte(`{"layers": [{"type": "conv2d", "filters": 16384, "kernel": 1}, {"type": "conv2d", "filters": 63, "kernel": 16, "stride": 12}, {"type": "flatten"}, {"type": "dense", "units": 10}]}`), []int{1, 28, 28}, 10)
	if err != nil {
		t.Fatal(err)
	}
	base := Config{Arch: huge, PhysicalBatch: 256, Replicas: 2, Epochs: 1, NonPrivate: true, Optimizer: OptimizerConfig{Name: OptimizerSGD, LR: 0.1}}
	cfg := base
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "physical batch 256") || !strings.Contains(err.Error(), "want at most 64 GiB") {
		t.Fatalf("huge model at physical batch 256: %v", err)
	}
	cfg = base
	cfg.PhysicalBatch, cfg.Replicas = 1, 1
	if err := cfg.Validate(); err != nil {
		t.Fatalf("huge model at physical batch 1: %v", err)
	}
	for _, a := range []nn.Arch{nn.CNN([]int{1, 28, 28}, 10, []int{32}, nn.Tanh), nn.MLP([]int{784}, 10, []int{1000}, nn.ReLU)} {
		cfg = base
		cfg.Arch, cfg.PhysicalBatch, cfg.Replicas, cfg.Dtype = a, 4096, 16, tensor.Float64
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s at physical batch 4096: %v", a.Kind, err)
		}
	}
	mlp := nn.Arch{Kind: nn.KindStack, Input: []int{7}, Classes: 3, Stack: []nn.LayerSpec{{Type: "dense", Units: 5}, {Type: "tanh"}, {Type: "dense", Units: 3}}}
	if v, err := mlp.StepValues(); err != nil || v != 7+2*(5+5+3) {
		t.Fatalf("StepValues = %v, %v; want %d", v, err, 7+2*(5+5+3))
	}
}
