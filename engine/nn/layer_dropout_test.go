package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"
)

// dropNet builds a net [dropout(p), dense identity] on d features, so that its logits are the
// dropout's output.
func dropNet(t *testing.T, d int, p float64, batch int, train bool) *Net {
	t.Helper()
	arch := Arch{Kind: KindStack, Input: []int{d}, Classes: d, Stack: []LayerSpec{{Type: "dropout", Rate: p}, {Type: "dense", Units: d}}}
	params, err := NewParams(arch, tensor.Float64, 1)
	if err != nil {
		t.Fatal(err)
	}
	w := params.List[0].Value.Data().([]float64)
	clear(w)
	clear(params.List[1].Value.Data().([]float64))
	for j := range d {
		w[j*d+j] = 1
	}
	net, err := Build(arch, params, batch, train)
	if err != nil {
		t.Fatal(err)
	}
	return net
}

// TestDropoutMasks: in a training net, each value is dropped with frequency p (within 5
// standard deviations over 4·4096 values) and the others scaled by exactly 1/(1 − p); a row's
// mask is a function of its seed alone (the same seed at another row position gives the same
// output, another seed another mask); an evaluation net is the identity; a training net without
// seeds refuses to run, never drops silently.
func TestDropoutMasks(t *testing.T) {
	const d, b, p = 4096, 4, 0.3
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float64, b*d)
	for j := range x {
		x[j] = 1 + r.Float64()
	}
	xt := tensor.New(tensor.WithShape(b, d), tensor.WithBacking(x))
	y := tensor.New(tensor.WithShape(b, d), tensor.Of(tensor.Float64))
	net := dropNet(t, d, p, b, true)
	defer net.Close()
	if !net.HasDropout() {
		t.Fatal("no dropout in the training net")
	}
	if err := net.Run(xt, y); err == nil {
		t.Error("ran without dropout seeds")
	}
	seeds := []uint64{DropoutSeed(7, 0), DropoutSeed(7, 1), DropoutSeed(7, 2), DropoutSeed(7, 0)}
	copy(x[3*d:], x[:d]) // row 3: row 0's values and seed
	if err := net.SetDropoutSeeds(seeds); err != nil {
		t.Fatal(err)
	}
	if err := net.Run(xt, y); err != nil {
		t.Fatal(err)
	}
	z := append([]float64(nil), net.Logits().Data().([]float64)...)
	dropped := 0
	for j, v := range z {
		switch {
		case v == 0:
			dropped++
		case v != x[j]*(1/(1-p)):
			t.Fatalf("value %d: %v, want 0 or %v", j, v, x[j]*(1/(1-p)))
		}
	}
	n := float64(b * d)
	if sd := math.Sqrt(n * p * (1 - p)); math.Abs(float64(dropped)-n*p) > 5*sd {
		t.Errorf("dropped %d of %v, want about %v", dropped, n, n*p)
	}
	same, differ := 0, 0
	for j := range d {
		if z[3*d+j] == z[j] {
			same++
		}
		if (z[d+j] == 0) != (z[2*d+j] == 0) {
			differ++
		}
	}
	if same != d {
		t.Errorf("the same seed at another position gave another mask (%d of %d values equal)", same, d)
	}
	if differ < d/10 {
		t.Errorf("seeds 1 and 2 gave nearly the same masks (%d differences)", differ)
	}
	ev := dropNet(t, d, p, b, false)
	defer ev.Close()
	if ev.HasDropout() {
		t.Error("the evaluation net has dropout")
	}
	if err := ev.Run(xt, nil); err != nil {
		t.Fatal(err)
	}
	for j, v := range ev.Logits().Data().([]float64) {
		if v != x[j] {
			t.Fatalf("evaluation value %d: %v, want the input %v", j, v, x[j])
		}
	}
}
