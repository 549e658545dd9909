package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"
)

// refConv is a grouped convolution by its definition, one output at a time: out[f][oy][ox] =
// b[f] + Σ over group(f)'s channels c and the window of w(f, c, ky, kx)·x[c][y][x] (zero outside
// the image).
func refConv(x []float64, c, h, wd int, f, k, s, pad, groups int, w func(f, c, ky, kx int) float64, b func(f int) float64) (out []float64, oh, ow int) {
	oh, ow = (h+2*pad-k)/s+1, (wd+2*pad-k)/s+1
	out = make([]float64, f*oh*ow)
	cin, fo := c/groups, f/groups
	for o := range f {
		g := o / fo
		for oy := range oh {
			for ox := range ow {
				v := b(o)
				for ci := g * cin; ci < (g+1)*cin; ci++ {
					for ky := range k {
						for kx := range k {
							y, xx := oy*s-pad+ky, ox*s-pad+kx
							if y >= 0 && y < h && xx >= 0 && xx < wd {
								v += w(o, ci-g*cin, ky, kx) * x[ci*h*wd+y*wd+xx]
							}
						}
					}
				}
				out[o*oh*ow+oy*ow+ox] = v
			}
		}
	}
	return out, oh, ow
}

// TestGroupedStandardizedConvForward: a grouped (and weight-standardized) convolution, as the
// first layer (on the raw image's patches) and after a 1×1 identity convolution (on the row
// layout), equals refConv with each group's weights, standardized by the test's own mean and
// variance: the evaluation net's logits are the convolution's outputs, read through a
// flatten and an identity dense layer.
func TestGroupedStandardizedConvForward(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for trial := range 6 {
		groups := 1 + r.IntN(3)
		std := trial%2 == 1
		if groups == 1 && !std {
			groups = 2
		}
		first := trial < 3
		c := groups * (1 + r.IntN(2))
		f := groups * (1 + r.IntN(3))
		k, s, pad := 1+r.IntN(3), 1+r.IntN(3), r.IntN(2)
		h, wd := 5+r.IntN(4), 4+r.IntN(4)
		oh, ow := (h+2*pad-k)/s+1, (wd+2*pad-k)/s+1
		conv := LayerSpec{Type: "conv2d", Filters: f, Kernel: k, Stride: s, Pad: pad, Groups: groups, Standardize: std}
		stack := []LayerSpec{conv, {Type: "flatten"}, {Type: "dense", Units: f * oh * ow}}
		if !first {
			stack = append([]LayerSpec{{Type: "conv2d", Filters: c, Kernel: 1, Stride: 1}}, stack...)
		}
		arch := Arch{Kind: KindStack, Input: []int{c, h, wd}, Classes: f * oh * ow, Stack: stack}
		name := fmt.Sprintf("groups=%d std=%v first=%v k=%d s=%d pad=%d", groups, std, first, k, s, pad)
		params, err := NewParams(arch, tensor.Float64, uint64(trial))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		byName := map[string][]float64{}
		for _, p := range params.List {
			d := p.Value.Data().([]float64)
			for j := range d {
				d[j] = r.NormFloat64()
			}
			byName[p.Name] = d
		}
		// The identity layers.
		dense := params.List[2*len(params.Shapes)-2].Value.Data().([]float64)
		clear(dense)
		clear(params.List[2*len(params.Shapes)-1].Value.Data().([]float64))
		n := f * oh * ow
		for j := range n {
			dense[j*n+j] = 1
		}
		ci := ""
		if !first {
			w0, b0 := params.List[0].Value.Data().([]float64), params.List[1].Value.Data().([]float64)
			clear(w0)
			clear(b0)
			for j := range c {
				w0[j*c+j] = 1
			}
			ci = "1."
		} else {
			ci = "0."
		}
		cin, fo := c/groups, f/groups
		prefix := func(g int) string {
			p := ci + "conv2d"
			if groups > 1 {
				p += fmt.Sprintf(".g%d", g)
			}
			return p
		}
		// Each group's weight, standardized by column when std (the test's own statistics).
		ws := make([][]float64, groups)
		for g := range groups {
			src := byName[prefix(g)+".w"]
			if src == nil {
				t.Fatalf("%s: no parameter %s.w", name, prefix(g))
			}
			w := append([]float64(nil), src...)
			if std {
				rows := len(w) / fo
				for o := range fo {
					var mu, v float64
					for j := range rows {
						mu += w[j*fo+o]
					}
					mu /= float64(rows)
					for j := range rows {
						v += (w[j*fo+o] - mu) * (w[j*fo+o] - mu)
					}
					sd := math.Sqrt(v/float64(rows) + 1e-5)
					for j := range rows {
						w[j*fo+o] = (w[j*fo+o] - mu) / sd
					}
				}
			}
			ws[g] = w
		}
		weight := func(o, cc, ky, kx int) float64 {
			g, oo := o/fo, o%fo
			row := (cc*k+ky)*k + kx // the raw image's patches: channel, then window
			if !first {
				row = (ky*k+kx)*cin + cc // the row layout's patches: window, then channel
			}
			return ws[g][row*fo+oo]
		}
		bias := func(o int) float64 { return byName[prefix(o/fo)+".b"][o%fo] }
		const batch = 2
		x := make([]float64, batch*c*h*wd)
		for j := range x {
			x[j] = r.NormFloat64()
		}
		net, err := Build(arch, params, batch, false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		xs := []int{batch, arch.InputSize()}
		if arch.ImageInput() {
			xs = []int{batch, c, h, wd}
		}
		if err := net.Run(tensor.New(tensor.WithShape(xs...), tensor.WithBacking(x)), nil); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := net.Logits().Data().([]float64)
		for i := range batch {
			want, _, _ := refConv(x[i*c*h*wd:(i+1)*c*h*wd], c, h, wd, f, k, s, pad, groups, weight, bias)
			for o := range f {
				for p := range oh * ow {
					g, e := got[i*n+p*f+o], want[o*oh*ow+p]
					if math.Abs(g-e) > 1e-9*(1+math.Abs(e)) {
						t.Fatalf("%s: example %d, filter %d, position %d: %v, want %v", name, i, o, p, g, e)
					}
				}
			}
		}
		net.Close()
	}
}
