package nn

import (
	"testing"
)

// wrnCount counts WRN-depth-width's parameters layer by layer from the architecture's
// definition (the paper's table: convolutions k·k·in·out + out, GroupNorm 2 per channel, the
// classifier), independently of the stack: the figure PyTorch's sum of p.numel() gives for the
// same network (docs/models.md quotes it).
func wrnCount(inC, classes, depth, width int) int {
	conv := func(in, out, k int) int { return k*k*in*out + out }
	n := conv(inC, 16, 3)
	c := 16
	for stage, f := range []int{16 * width, 32 * width, 64 * width} {
		for blk := range (depth - 4) / 6 {
			if c != f || (stage > 0 && blk == 0) {
				n += 2*c + conv(c, f, 3) + 2*f + conv(f, f, 3) + conv(c, f, 1)
			} else {
				n += 2*c + conv(c, f, 3) + 2*f + conv(f, f, 3)
			}
			c = f
		}
	}
	return n + 2*c + c*classes + classes
}

// TestWideResNet: WRN-16-4 builds on CIFAR-10 and MNIST shapes with the parameter count of its
// definition (2 751 146 on CIFAR-10, 2 750 858 on MNIST, as PyTorch counts the same network), ends in one logit per class, and bad depths are refused.
func TestWideResNet(t *testing.T) {
	for _, in := range [][]int{{3, 32, 32}, {1, 28, 28}} {
		a, err := WideResNet(in, 10, 16, 4)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := a.NumParams(), wrnCount(in[0], 10, 16, 4); got != want || got == 0 {
			t.Errorf("%v: %d parameters, want %d", in, got, want)
		}
		t.Logf("WRN-16-4 on %v: %d parameters, %d layers", in, a.NumParams(), len(a.Stack))
	}
	if a, _ := WideResNet([]int{3, 32, 32}, 10, 16, 4); a.NumParams() != 2751146 {
		t.Errorf("CIFAR-10: %d parameters, want PyTorch's 2751146", a.NumParams())
	}
	for _, bad := range [][2]int{{15, 4}, {4, 4}, {16, 0}} {
		if _, err := WideResNet([]int{3, 32, 32}, 10, bad[0], bad[1]); err == nil {
			t.Errorf("depth %d width %d accepted", bad[0], bad[1])
		}
	}
	if _, err := WideResNet([]int{784}, 10, 16, 4); err == nil {
		t.Error("flat input accepted")
	}
}
