package numeric

import (
	"math"
	"math/cmplx"
	"testing"

	"gonum.org/v1/gonum/dsp/fourier"
)

// TestPowPolar: entries agree with cmplx.Pow, zeros stay zero, and on a DFT the power is the
// DFT of the circular self-convolution (a law of three values composed with itself 3 times).
func TestPowPolar(t *testing.T) {
	c := []complex128{complex(1, 1), complex(-0.3, 0.2), complex(0.5, 0), 0, complex(-2, -1e-3)}
	want := make([]complex128, len(c))
	for i, z := range c {
		want[i] = cmplx.Pow(z, 2.5)
	}
	PowPolar(c, 2.5)
	for i := range c {
		if cmplx.Abs(c[i]-want[i]) > 1e-14*cmplx.Abs(want[i]) {
			t.Errorf("entry %d: %v, cmplx.Pow gives %v", i, c[i], want[i])
		}
	}
	if c[3] != 0 {
		t.Errorf("a zero became %v", c[3])
	}

	p := []float64{0.2, 0.5, 0.3, 0, 0, 0, 0, 0}
	fft := fourier.NewFFT(len(p))
	coef := fft.Coefficients(nil, p)
	PowPolar(coef, 3)
	got := fft.Sequence(nil, coef)
	conv := p
	for range 2 { // conv = p ⊛ p ⊛ p, circularly
		next := make([]float64, len(p))
		for i, a := range conv {
			for j, b := range p {
				next[(i+j)%len(p)] += a * b
			}
		}
		conv = next
	}
	for i := range got {
		if g := got[i] / float64(len(p)); math.Abs(g-conv[i]) > 1e-15 {
			t.Errorf("self-convolution entry %d: %v, want %v", i, g, conv[i])
		}
	}
}
