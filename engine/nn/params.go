package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"gorgonia.org/tensor"
)

// Param is one parameter tensor. Its Value is shared by every graph built over the same
// Params, so an in-place update is seen by the training and the evaluation graphs alike.
type Param struct {
	Name  string
	Value *tensor.Dense
}

// Params holds a model's parameters: first two per GEMM layer (weight In×Out, bias 1×Out), in
// layer order, then the other layers' tensors (Decl.Other, e.g. a normalization's γ and β), in
// layer order. Shapes lists the GEMM layers.
type Params struct {
	Dtype  tensor.Dtype
	List   []*Param
	Shapes []LayerShape
}

// NewParams allocates and initializes the parameters of arch: GEMM layers with the usual fan-in
// rule (uniform on ±1/√fan_in for weights and biases, as PyTorch's Linear and Conv2d do), drawn
// reproducibly from seed; the other tensors to their declared constants.
func NewParams(arch Arch, dt tensor.Dtype, seed uint64) (*Params, error) {
	if dt != tensor.Float32 && dt != tensor.Float64 {
		return nil, fmt.Errorf("params: dtype %v: want float32 or float64", dt)
	}
	d, err := arch.decl()
	if err != nil {
		return nil, err
	}
	shapes := d.Gemm
	rng := rand.New(rand.NewPCG(seed, 0x9a2a1f3c5d7e4b61))
	p := &Params{Dtype: dt, Shapes: shapes}
	for _, l := range shapes {
		bound := 1 / math.Sqrt(float64(l.In))
		w := tensor.New(tensor.WithShape(l.In, l.Out), tensor.Of(dt))
		b := tensor.New(tensor.WithShape(1, l.Out), tensor.Of(dt))
		fillUniform(w, rng, bound)
		fillUniform(b, rng, bound)
		p.List = append(p.List, &Param{Name: l.Name + ".w", Value: w}, &Param{Name: l.Name + ".b", Value: b})
	}
	for _, o := range d.Other {
		v := tensor.New(tensor.WithShape(o.Rows, o.Cols), tensor.Of(dt))
		val := func() float64 {
			if o.Normal {
				return o.Init * rng.NormFloat64()
			}
			return o.Init
		}
		switch x := v.Data().(type) {
		case []float32:
			for i := range x {
				x[i] = float32(val())
			}
		case []float64:
			for i := range x {
				x[i] = val()
			}
		}
		p.List = append(p.List, &Param{Name: o.Name, Value: v})
	}
	return p, nil
}

func fillUniform(t *tensor.Dense, rng *rand.Rand, bound float64) {
	switch d := t.Data().(type) {
	case []float32:
		for i := range d {
			d[i] = float32((2*rng.Float64() - 1) * bound)
		}
	case []float64:
		for i := range d {
			d[i] = (2*rng.Float64() - 1) * bound
		}
	}
}

// Count is the total number of scalars.
func (p *Params) Count() int {
	n := 0
	for _, q := range p.List {
		n += q.Value.Shape().TotalSize()
	}
	return n
}

// Clone deep-copies the parameters.
func (p *Params) Clone() *Params {
	q := &Params{Dtype: p.Dtype, Shapes: append([]LayerShape(nil), p.Shapes...)}
	for _, x := range p.List {
		q.List = append(q.List, &Param{Name: x.Name, Value: x.Value.Clone().(*tensor.Dense)})
	}
	return q
}

// Data returns the backing slice of a parameter as []T. It panics if T is not the
// parameters' dtype, which is a programming error.
func Data[T float32 | float64](p *Param) []T {
	return p.Value.Data().([]T)
}
