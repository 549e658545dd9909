package nn

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/dpsgd/dpsgd/engine/nn/scatter"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Scatter is the scattering transform (package scatter) with J scales and L angles, a fixed
// feature extractor with no parameters and no rule: it must be a model's first layer, on
// [C,H,W] images. Each channel gives scatter.Channels(J, L) maps of OutH×OutW; the output is in
// the row layout, channel c's map m being feature c·Maps + m. As with a first convolution's
// im2col, the transform runs in Go before the graph (Net.Run), whose input is the features;
// the features are rounded to float32, so that those a run computes once per dataset
// (FeatureCache) and those computed per batch (evaluation, predict) are the same numbers.
type Scatter struct {
	J, L int
}

// Kind is "scatter".
func (l *Scatter) Kind() string { return "scatter" }

// Plan checks the input (the raw image) and returns the feature rows.
func (l *Scatter) Plan(in Shape, _ *Decl) (Shape, error) {
	if in.Layout != Image {
		return Shape{}, fmt.Errorf("scatter needs the raw [C,H,W] image: it must be the model's first layer on image data, got %v", in)
	}
	t, err := scatter.New(in.H, in.W, l.J, l.L)
	if err != nil {
		return Shape{}, err
	}
	return Shape{Layout: Rows, C: in.C * t.Maps(), H: t.OutH(), W: t.OutW()}, nil
}

// Forward returns x: the graph's input is already the features (Net.Run computes them).
func (l *Scatter) Forward(b *Builder, x *G.Node, in Shape) (*G.Node, error) {
	if x != b.net.x {
		return nil, fmt.Errorf("scatter must be the model's first layer")
	}
	return x, nil
}

// scatterGeom is the transform of a model whose first layer is a Scatter, and its sizes.
type scatterGeom struct {
	t       *scatter.Transform
	c       int // input channels
	in, out int // values per example: image, features
}

// scatterOf returns the transform of arch's first layer when it is a Scatter.
func scatterOf(a Arch) (*scatterGeom, bool, error) {
	if a.Kind != KindStack || len(a.Stack) == 0 || a.Stack[0].Type != "scatter" || len(a.Input) != 3 {
		return nil, false, nil
	}
	t, err := scatter.New(a.Input[1], a.Input[2], a.Stack[0].J, a.Stack[0].L)
	if err != nil {
		return nil, true, err
	}
	c := a.Input[0]
	return &scatterGeom{t: t, c: c, in: a.InputSize(), out: c * t.Maps() * t.OutH() * t.OutW()}, true, nil
}

// features writes the features of n images x (n×C·H·W, channels-first) into dst (n×out, each
// example's P×(C·Maps) rows), examples split over GOMAXPROCS goroutines, each with its own
// workspace. Example i's features depend on its own pixels alone.
func featuresInto[S, D float32 | float64](g *scatterGeom, dst []D, x []S, n int) {
	w := min(runtime.GOMAXPROCS(0), n)
	var wg sync.WaitGroup
	for k := 0; k < w; k++ {
		lo, hi := k*n/w, (k+1)*n/w
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := g.t
			ws := t.NewWorkspace()
			h, wd, maps, plane := t.H, t.W, t.Maps(), t.OutH()*t.OutW()
			img := make([]float64, h*wd)
			maps64 := make([]float64, maps*plane)
			cols := g.c * maps
			for i := lo; i < hi; i++ {
				out := dst[i*g.out : (i+1)*g.out]
				for c := 0; c < g.c; c++ {
					src := x[i*g.in+c*h*wd : i*g.in+(c+1)*h*wd]
					for j, v := range src {
						img[j] = float64(v)
					}
					t.Apply(ws, maps64, img)
					for m := 0; m < maps; m++ {
						for p := 0; p < plane; p++ {
							out[p*cols+c*maps+m] = D(float32(maps64[m*plane+p]))
						}
					}
				}
			}
		}()
	}
	wg.Wait()
}

// scatterRun fills the net's input buffer from x: the transform of the images, or with pre the
// features themselves (B×out values, from a FeatureCache).
func (n *Net) scatterRun(x *tensor.Dense, pre bool) error {
	g := n.scat
	want := g.in
	if pre {
		want = g.out
	}
	if x.Shape().TotalSize() != n.Batch*want {
		return fmt.Errorf("nn: input of %d values, want %d×%d", x.Shape().TotalSize(), n.Batch, want)
	}
	switch d := n.patches.Data().(type) {
	case []float32:
		s, ok := x.Data().([]float32)
		if !ok {
			return fmt.Errorf("nn: input dtype %v, want float32", x.Dtype())
		}
		if pre {
			copy(d, s)
		} else {
			featuresInto(g, d, s, n.Batch)
		}
	case []float64:
		s, ok := x.Data().([]float64)
		if !ok {
			return fmt.Errorf("nn: input dtype %v, want float64", x.Dtype())
		}
		if pre {
			copy(d, s)
		} else {
			featuresInto(g, d, s, n.Batch)
		}
	}
	return nil
}

// RunFeatures is Run on the features of the batch's images (B×FeatureSize values, as a
// FeatureCache holds them) instead of the images, for a model whose first layer is a Scatter.
func (n *Net) RunFeatures(f, y *tensor.Dense) error {
	if n.scat == nil {
		return fmt.Errorf("nn: RunFeatures: the model's first layer is not a scatter layer")
	}
	return n.run(f, y, true)
}

// FeatureCache holds the scattering features of whole datasets, for a model whose first layer
// is a Scatter: computed once per dataset (the transform uses no data and has no parameters),
// then read by every step and evaluation. Safe for concurrent use.
type FeatureCache struct {
	g    *scatterGeom
	mu   sync.Mutex
	sets map[featKey][]float32
}

type featKey struct {
	p *float32
	n int
}

// NewFeatureCache returns the cache of arch's features, or nil when arch's first layer is not
// a Scatter.
func NewFeatureCache(arch Arch) (*FeatureCache, error) {
	g, ok, err := scatterOf(arch)
	if !ok || err != nil {
		return nil, err
	}
	return &FeatureCache{g: g, sets: map[featKey][]float32{}}, nil
}

// Width is the number of feature values of one example.
func (c *FeatureCache) Width() int { return c.g.out }

// Of returns the features of the n images x (n×C·H·W), n×Width values, computed on the first
// call for that slice. x must not change afterwards (datasets do not).
func (c *FeatureCache) Of(x []float32, n int) []float32 {
	if n == 0 {
		return nil
	}
	k := featKey{p: unsafe.SliceData(x), n: n}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.sets[k]; ok {
		return f
	}
	f := make([]float32, n*c.g.out)
	featuresInto(c.g, f, x[:n*c.g.in], n)
	c.sets[k] = f
	return f
}

// ScatterNet is Tramèr and Boneh's linear ScatterNet ("Differentially Private Learning Needs
// Better Features (or Much More Data)"): the scattering transform with J = 2 and L = 8 (81 maps
// of (H/4)×(W/4) per input channel), GroupNorm in groups of 3 maps (27 groups per channel),
// then one dense layer to the classes; a stack model. On 1×28×28 MNIST that is 39,862
// parameters.
func ScatterNet(input []int, classes int) Arch {
	c := 1
	if len(input) == 3 {
		c = input[0]
	}
	return Arch{Kind: KindStack, Input: append([]int(nil), input...), Classes: classes, Stack: []LayerSpec{
		{Type: "scatter", J: 2, L: 8}, {Type: "groupnorm", Groups: 27 * c}, {Type: "flatten"}, {Type: "dense", Units: classes},
	}}
}
