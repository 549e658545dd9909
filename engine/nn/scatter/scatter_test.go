package scatter

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// mnistDir is the MNIST data directory the reference's MNIST cases read their pixels from.
func mnistDir() string {
	if d := os.Getenv("DPSGD_MNIST_DIR"); d != "" {
		return d
	}
	return "/work/shared/datasets/mnist"
}

func mnistTestImage(t *testing.T, i int) []float64 {
	f, err := os.Open(filepath.Join(mnistDir(), "t10k-images-idx3-ubyte.gz"))
	if err != nil {
		t.Skipf("MNIST not found (%v): set DPSGD_MNIST_DIR", err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	img := make([]float64, 784)
	for k := range img {
		img[k] = float64(b[16+784*i+k]) / 255
	}
	return img
}

// TestKymatioReference checks the transform against Kymatio's Scattering2D on the cases of
// testdata/kymatio_ref.json (made by testdata/kymatio_ref.py): every coefficient within 1e-5
// of the case's largest, and each map within 1e-5 relative in norm.
func TestKymatioReference(t *testing.T) {
	data, err := os.ReadFile("testdata/kymatio_ref.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name       string
		H, W, J, L int
		Shape      []int
		Out, Image []float64
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) != 5 {
		t.Fatalf("%d cases, want 5", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			img := c.Image
			switch c.Name {
			case "mnist-test-0":
				img = mnistTestImage(t, 0)
			case "mnist-test-1":
				img = mnistTestImage(t, 1)
			}
			tr, err := New(c.H, c.W, c.J, c.L)
			if err != nil {
				t.Fatal(err)
			}
			if got := []int{tr.Maps(), tr.OutH(), tr.OutW()}; got[0] != c.Shape[0] || got[1] != c.Shape[1] || got[2] != c.Shape[2] {
				t.Fatalf("shape %v, Kymatio's %v", got, c.Shape)
			}
			out := make([]float64, len(c.Out))
			tr.Apply(tr.NewWorkspace(), out, img)
			big := 0.0
			for _, v := range c.Out {
				big = math.Max(big, math.Abs(v))
			}
			plane := tr.OutH() * tr.OutW()
			for m := 0; m < tr.Maps(); m++ {
				var d2, r2 float64
				for k := m * plane; k < (m+1)*plane; k++ {
					d := out[k] - c.Out[k]
					if math.Abs(d) > 1e-5*big || math.IsNaN(d) {
						t.Fatalf("map %d, coefficient %d: %g, Kymatio %g", m, k-m*plane, out[k], c.Out[k])
					}
					d2 += d * d
					r2 += c.Out[k] * c.Out[k]
				}
				if math.Sqrt(d2) > 1e-5*math.Sqrt(r2)+1e-7*big {
					t.Errorf("map %d: relative error %.3g", m, math.Sqrt(d2/r2))
				}
			}
		})
	}
}

func randImage(r *rand.Rand, n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = r.Float64()
	}
	return x
}

// TestOrderZeroLinear: the order-0 map is linear in the image (a low-pass filter and a
// subsampling), the others positively homogeneous (moduli of linear maps).
func TestOrderZeroLinear(t *testing.T) {
	tr, err := New(28, 28, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	ws := tr.NewWorkspace()
	r := rand.New(rand.NewPCG(1, 2))
	a, b := randImage(r, 784), randImage(r, 784)
	ab := make([]float64, 784)
	for i := range ab {
		ab[i] = 2*a[i] - 3*b[i]
	}
	n := tr.Maps() * 49
	sa, sb, sab := make([]float64, n), make([]float64, n), make([]float64, n)
	tr.Apply(ws, sa, a)
	tr.Apply(ws, sb, b)
	tr.Apply(ws, sab, ab)
	for k := 0; k < 49; k++ {
		if want := 2*sa[k] - 3*sb[k]; math.Abs(sab[k]-want) > 1e-12 {
			t.Fatalf("order 0, coefficient %d: S(2a−3b) = %g, 2S(a)−3S(b) = %g", k, sab[k], want)
		}
	}
	for i := range ab {
		ab[i] = 2.5 * a[i]
	}
	tr.Apply(ws, sab, ab)
	for k := range sab {
		if math.Abs(sab[k]-2.5*sa[k]) > 1e-12*math.Max(1, math.Abs(sa[k])) {
			t.Fatalf("coefficient %d: S(2.5a) = %g, 2.5·S(a) = %g", k, sab[k], 2.5*sa[k])
		}
	}
}

// TestEnergyBound: the wavelet transform is non-expansive (Littlewood–Paley: Σ|ψ̂|² + |φ̂|² ≤ 1
// up to Kymatio's filter normalization), so the scattering is Lipschitz: ‖S(a) − S(b)‖ is
// bounded by a modest multiple of ‖a − b‖, with the multiple measured on random pairs and never
// above a fixed bound; a constant image has all of its energy in order 0.
func TestEnergyBound(t *testing.T) {
	tr, err := New(28, 28, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	ws := tr.NewWorkspace()
	r := rand.New(rand.NewPCG(3, 4))
	n := tr.Maps() * 49
	sa, sb := make([]float64, n), make([]float64, n)
	for trial := 0; trial < 20; trial++ {
		a, b := randImage(r, 784), randImage(r, 784)
		for i := range b {
			b[i] = a[i] + 0.1*(b[i]-0.5)
		}
		tr.Apply(ws, sa, a)
		tr.Apply(ws, sb, b)
		// The output is subsampled by 2^J in each direction: norms compare after the factor
		// 2^J that the subsampling of a smooth map takes off.
		ds, dx := 0.0, 0.0
		for i := range sa {
			ds += (sa[i] - sb[i]) * (sa[i] - sb[i])
		}
		for i := range a {
			dx += (a[i] - b[i]) * (a[i] - b[i])
		}
		if ratio := math.Sqrt(ds) * 4 / math.Sqrt(dx); ratio > 2 {
			t.Fatalf("trial %d: ‖S(a)−S(b)‖·2^J/‖a−b‖ = %g, want ≤ 2", trial, ratio)
		}
	}
	c := make([]float64, 784)
	for i := range c {
		c[i] = 0.7
	}
	tr.Apply(ws, sa, c)
	for k, v := range sa {
		if k < 49 {
			if math.Abs(v-0.7) > 1e-3 {
				t.Fatalf("constant image: order 0 coefficient %d = %g, want 0.7", k, v)
			}
		} else if math.Abs(v) > 1e-9 {
			t.Fatalf("constant image: coefficient %d (order ≥ 1) = %g, want 0", k, v)
		}
	}
}

// TestTranslationInvariance: shifting a smooth blob by τ pixels (sub-pixel shifts included)
// changes the coefficients, relative to their norm, by at most about τ/2^J (the bound of
// Mallat's "Group Invariant Scattering", up to a constant: 1.5 here), and by less than it
// changes the image itself.
func TestTranslationInvariance(t *testing.T) {
	tr, err := New(28, 28, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	ws := tr.NewWorkspace()
	blob := func(cx, cy float64) []float64 {
		x := make([]float64, 784)
		for i := 0; i < 28; i++ {
			for j := 0; j < 28; j++ {
				di, dj := float64(i)-cy, float64(j)-cx
				x[i*28+j] = math.Exp(-(di*di)/18-(dj*dj)/8) * (1 + 0.5*math.Sin(float64(i)))
			}
		}
		return x
	}
	rel := func(a, b []float64) float64 {
		var d, n float64
		for i := range a {
			d += (a[i] - b[i]) * (a[i] - b[i])
			n += a[i] * a[i]
		}
		return math.Sqrt(d / n)
	}
	a := blob(13.5, 13.5)
	n := tr.Maps() * 49
	sa, sb := make([]float64, n), make([]float64, n)
	tr.Apply(ws, sa, a)
	for _, tau := range []float64{0.25, 0.5, 1, 2} {
		b := blob(13.5+tau, 13.5)
		tr.Apply(ws, sb, b)
		rs, rx := rel(sa, sb), rel(a, b)
		if rs > 1.5*tau/4 || rs > 0.9*rx {
			t.Errorf("shift %g: relative change %.3g in the scattering, %.3g in the image: want ≤ %.3g and under 0.9× the image's", tau, rs, rx, 1.5*tau/4)
		}
	}
}

// TestExampleIsolation: NaN, ±Inf, 1e30, −0 and subnormal pixels give finite or non-finite
// coefficients, but a following Apply on another image with the same workspace is unaffected.
func TestExampleIsolation(t *testing.T) {
	tr, err := New(28, 28, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	ws := tr.NewWorkspace()
	r := rand.New(rand.NewPCG(5, 6))
	clean := randImage(r, 784)
	n := tr.Maps() * 49
	ref, got := make([]float64, n), make([]float64, n)
	tr.Apply(tr.NewWorkspace(), ref, clean)
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e30, math.Copysign(0, -1), 5e-324} {
		for _, pos := range []int{0, 27, 393, 783} {
			bad := append([]float64(nil), clean...)
			bad[pos] = v
			tr.Apply(ws, got, bad)
			tr.Apply(ws, got, clean)
			for k := range got {
				if got[k] != ref[k] {
					t.Fatalf("pixel %d = %g before: coefficient %d = %g, want %g", pos, v, k, got[k], ref[k])
				}
			}
		}
	}
}

func TestNewErrors(t *testing.T) {
	for _, c := range []struct{ h, w, j, l int }{{28, 28, 0, 8}, {28, 28, 7, 8}, {28, 28, 5, 8}, {3, 28, 2, 8}, {28, 28, 2, 0}, {28, 28, 2, 17}} {
		if _, err := New(c.h, c.w, c.j, c.l); err == nil {
			t.Errorf("New(%d, %d, %d, %d): no error", c.h, c.w, c.j, c.l)
		}
	}
}

func TestReflect(t *testing.T) {
	// numpy.pad(np.arange(4), 6, mode="reflect") = [0 1 2 3 2 1 0 1 2 3 2 1 0 1 2 3]
	got := []int{}
	for i := -6; i < 10; i++ {
		got = append(got, reflect(i, 4))
	}
	exp := []int{0, 1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1, 2, 3}
	for i := range got {
		if got[i] != exp[i] {
			t.Fatalf("reflect: %v, want %v", got, exp)
		}
	}
}

func BenchmarkApplyMNIST(b *testing.B) {
	tr, _ := New(28, 28, 2, 8)
	ws := tr.NewWorkspace()
	img := randImage(rand.New(rand.NewPCG(1, 1)), 784)
	out := make([]float64, tr.Maps()*49)
	for b.Loop() {
		tr.Apply(ws, out, img)
	}
}
