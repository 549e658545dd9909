package model

import (
	"reflect"
	"testing"

	"github.com/dpsgd/dpsgd/engine/nn"
	"gorgonia.org/tensor"
)

// TestScatterNetRoundTrip: a saved ScatterNet keeps its scatter layer (J, L) and parameters, so
// that the model predicts from raw images.
func TestScatterNetRoundTrip(t *testing.T) {
	arch := nn.ScatterNet([]int{1, 12, 12}, 3)
	a := testArtifact(t, arch, tensor.Float32, 4)
	data, err := Encode(a)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Arch, b.Arch) || b.Arch.Stack[0].J != 2 || b.Arch.Stack[0].L != 8 {
		t.Fatalf("decoded arch %+v, want %+v", b.Arch, a.Arch)
	}
	if !b.Arch.ImageInput() {
		t.Error("the decoded ScatterNet does not read images")
	}
}
