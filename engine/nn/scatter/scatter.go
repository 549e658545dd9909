// Package scatter computes the 2-D scattering transform of images: a fixed, data-independent
// feature extractor made of Morlet wavelets, complex moduli and a Gaussian low-pass filter
// (Bruna and Mallat, "Invariant Scattering Convolution Networks"; Oyallon and Mallat, "Deep
// Roto-Translation Scattering for Object Classification"). With J scales and L angles, each
// input channel of an H×W image gives 1 + J·L + L²·J·(J−1)/2 coefficient maps of about
// (H/2^J)×(W/2^J): the order-0 low-pass average, the J·L order-1 maps |x ⋆ ψ_{j,θ}| ⋆ φ_J and
// the order-2 maps ||x ⋆ ψ_{j1,θ1}| ⋆ ψ_{j2,θ2}| ⋆ φ_J for j1 < j2. On MNIST (J = 2, L = 8) that
// is 81 maps of 7×7.
//
// The filter bank, the padding and the order of the coefficients follow Kymatio's Scattering2D
// (Andreux et al., "Kymatio: Scattering Transforms in Python"), so that a model trained on
// these features matches one trained on Kymatio's, as Tramèr and Boneh's "Differentially
// Private Learning Needs Better Features (or Much More Data)" does: the image is padded by
// reflection to a multiple of 2^J with at least 2^J extra pixels, every convolution is a
// product in the Fourier domain (gonum's FFT), subsampling by 2^k is the periodization of the
// spectrum, and one coefficient is cropped from each border at the end.
//
// Since the transform uses no data, computing it costs no privacy; it is non-linear but acts on
// each example alone.
package scatter

import (
	"fmt"
	"math"
	"math/cmplx"

	"gonum.org/v1/gonum/dsp/fourier"
)

// Limits on the parameters.
const (
	MaxJ = 6  // scales
	MaxL = 16 // angles
)

// Transform is the scattering transform of H×W images at J scales and L angles: its filters,
// computed once. It is read-only after New and safe for concurrent use with one Workspace per
// goroutine.
type Transform struct {
	H, W, J, L int

	mp, np           int // padded size
	padTop, padLeft  int
	psi              [][][]float64 // psi[n][res]: wavelet n = j·L + θ, periodized to (mp>>res)×(np>>res)
	psiJ             []int
	phi              [][]float64 // phi[res]
	lows             []*sepLow   // lows[res]: the low-pass of a spatial map, separable
	outH, outW, maps int
}

// Channels is the number of coefficient maps per input channel: 1 + J·L + L²·J·(J−1)/2.
func Channels(j, l int) int { return 1 + j*l + l*l*j*(j-1)/2 }

// New builds the transform of H×W images with J scales (1 to MaxJ, 2^J ≤ H and W) and L angles
// (1 to MaxL).
func New(h, w, j, l int) (*Transform, error) {
	if j < 1 || j > MaxJ {
		return nil, fmt.Errorf("scales J = %d: want 1 to %d", j, MaxJ)
	}
	if l < 1 || l > MaxL {
		return nil, fmt.Errorf("angles L = %d: want 1 to %d", l, MaxL)
	}
	if h < 1<<j || w < 1<<j {
		return nil, fmt.Errorf("scales J = %d: the %d×%d image is smaller than 2^J = %d (want J ≤ %d)", j, h, w, 1<<j, maxJFor(min(h, w)))
	}
	t := &Transform{H: h, W: w, J: j, L: l}
	s := 1 << j
	t.mp, t.np = ((h+s)/s+1)*s, ((w+s)/s+1)*s
	t.padTop, t.padLeft = (t.mp-h)/2, (t.np-w)/2
	t.outH, t.outW = t.mp/s-2, t.np/s-2
	t.maps = Channels(j, l)
	for jj := 0; jj < j; jj++ {
		for th := 0; th < l; th++ {
			theta := float64(int(float64(l)-float64(l)/2-1)-th) * math.Pi / float64(l)
			sig := 0.8 * math.Exp2(float64(jj))
			xi := 3.0 / 4.0 * math.Pi / math.Exp2(float64(jj))
			f := realFFT2(morlet(t.mp, t.np, sig, theta, xi, 4/float64(l)), t.mp, t.np)
			var levels [][]float64
			for res := 0; res <= jj; res++ {
				levels = append(levels, periodize(f, t.mp, t.np, res))
			}
			t.psi = append(t.psi, levels)
			t.psiJ = append(t.psiJ, jj)
		}
	}
	f := realFFT2(gabor(t.mp, t.np, 0.8*math.Exp2(float64(j-1)), 0, 0, 1), t.mp, t.np)
	for res := 0; res < j; res++ {
		t.phi = append(t.phi, periodize(f, t.mp, t.np, res))
		t.lows = append(t.lows, t.separable(res))
	}
	return t, nil
}

// sepLow is the low-pass step of a real map at resolution res, written as Re(Ra·X·Rbᵀ): rows
// ra (outH×m) and rb (outW×n) of the complex operators IDFT ∘ periodization ∘ φ̂ ∘ DFT along
// each axis, cropped. φ is a Gaussian, whose 2-D filter is the outer product of two 1-D ones:
// this equals the Fourier-domain path (a DFT of X, the product with φ̂, the periodization, an
// inverse DFT) to rounding, at a fraction of its cost.
type sepLow struct {
	m, n   int
	ra, rb []complex128
}

// separable returns the low-pass of resolution res as a sepLow, or nil when φ̂ at res is not
// the outer product of its first column and row (then the Fourier path is used).
func (t *Transform) separable(res int) *sepLow {
	m, n := t.mp>>res, t.np>>res
	phi := t.phi[res]
	d := phi[0]
	if !(d > 0) {
		return nil
	}
	big := 0.0
	for _, v := range phi {
		big = math.Max(big, math.Abs(v))
	}
	a, b := make([]float64, m), make([]float64, n)
	for x := 0; x < m; x++ {
		a[x] = phi[x*n] / d
	}
	copy(b, phi[:n])
	for x := 0; x < m; x++ {
		for y := 0; y < n; y++ {
			if math.Abs(a[x]*b[y]-phi[x*n+y]) > 1e-13*big {
				return nil
			}
		}
	}
	k := 1 << (t.J - res)
	p := newPlans()
	op := func(f []float64, size, out int) []complex128 {
		r := make([]complex128, out*size)
		e := make([]complex128, size)
		s := make([]complex128, size/k)
		for x0 := 0; x0 < size; x0++ {
			clear(e)
			e[x0] = 1
			p.plan(size).Coefficients(e, e)
			for i := range s {
				var acc complex128
				for q := 0; q < k; q++ {
					acc += e[q*(size/k)+i] * complex(f[q*(size/k)+i], 0)
				}
				s[i] = acc / complex(float64(k), 0)
			}
			p.plan(size/k).Sequence(s, s)
			for i := 0; i < out; i++ {
				r[i*size+x0] = s[i+1] / complex(float64(size/k), 0)
			}
		}
		return r
	}
	return &sepLow{m: m, n: n, ra: op(a, m, t.outH), rb: op(b, n, t.outW)}
}

// apply writes Re(Ra·X·Rbᵀ) for the real map X, held in the real parts of x (m×n), into dst
// (outH×outW); tmp holds outH×n values.
func (l *sepLow) apply(dst []float64, x, tmp []complex128, outH, outW int) {
	m, n := l.m, l.n
	t := tmp[:outH*n]
	clear(t)
	for r := 0; r < outH; r++ {
		ra := l.ra[r*m : (r+1)*m]
		tr := t[r*n : (r+1)*n]
		for xx := 0; xx < m; xx++ {
			w := ra[xx]
			wr, wi := real(w), imag(w)
			row := x[xx*n : (xx+1)*n]
			for y := range tr {
				v := real(row[y])
				tr[y] += complex(wr*v, wi*v)
			}
		}
	}
	for r := 0; r < outH; r++ {
		tr := t[r*n : (r+1)*n]
		for c := 0; c < outW; c++ {
			rb := l.rb[c*n : (c+1)*n]
			acc := 0.0
			for y := range tr {
				acc += real(tr[y])*real(rb[y]) - imag(tr[y])*imag(rb[y])
			}
			dst[r*outW+c] = acc
		}
	}
}

func maxJFor(n int) int {
	j := 0
	for 2<<j <= n {
		j++
	}
	return j
}

// OutH and OutW are the size of each coefficient map; Maps is Channels(J, L).
func (t *Transform) OutH() int { return t.outH }

// OutW is the width of each coefficient map.
func (t *Transform) OutW() int { return t.outW }

// Maps is the number of coefficient maps per input channel.
func (t *Transform) Maps() int { return t.maps }

// gabor is Kymatio's 2-D Gabor filter on an m×n grid, periodized over 5×5 periods: a Gaussian
// envelope of width sigma, elongated by 1/slant across the angle theta, times e^{i·xi·(x cos θ
// + y sin θ)}. The rotation matrix's entries are rounded to float32 and the normalization uses
// 3.1415, as Kymatio's do.
func gabor(m, n int, sigma, theta, xi, slant float64) []complex128 {
	c, s := float64(float32(math.Cos(theta))), float64(float32(math.Sin(theta)))
	// curv = R·diag(1, slant²)·R⁻¹ / (2σ²), R = [[c, −s], [s, c]].
	d := slant * slant
	c00 := (c*c + s*s*d) / (2 * sigma * sigma)
	c01 := (c*s - s*c*d) / (2 * sigma * sigma)
	c10 := (s*c - c*s*d) / (2 * sigma * sigma)
	c11 := (s*s + c*c*d) / (2 * sigma * sigma)
	kc, ks := xi*math.Cos(theta), xi*math.Sin(theta)
	g := make([]complex128, m*n)
	for ex := -2; ex <= 2; ex++ {
		for ey := -2; ey <= 2; ey++ {
			for i := 0; i < m; i++ {
				xx := float64(ex*m + i)
				for k := 0; k < n; k++ {
					yy := float64(ey*n + k)
					re := -(c00*xx*xx + (c01+c10)*xx*yy + c11*yy*yy)
					g[i*n+k] += cmplx.Exp(complex(re, xx*kc+yy*ks))
				}
			}
		}
	}
	norm := complex(2*3.1415*sigma*sigma/slant, 0)
	for i := range g {
		g[i] /= norm
	}
	return g
}

// morlet is Kymatio's Morlet wavelet: a Gabor filter minus its envelope times the constant that
// makes its sum zero.
func morlet(m, n int, sigma, theta, xi, slant float64) []complex128 {
	wv := gabor(m, n, sigma, theta, xi, slant)
	env := gabor(m, n, sigma, theta, 0, slant)
	var sw, se complex128
	for i := range wv {
		sw += wv[i]
		se += env[i]
	}
	k := sw / se
	for i := range wv {
		wv[i] -= k * env[i]
	}
	return wv
}

// realFFT2 is the real part of the 2-D DFT of the m×n signal x.
func realFFT2(x []complex128, m, n int) []float64 {
	p := newPlans()
	p.fft2(x, m, n, false)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = real(v)
	}
	return out
}

// periodize is Kymatio's periodize_filter_fft: the filter f (m×n, in Fourier) with its high
// frequencies beyond the band of resolution res zeroed, folded onto (m>>res)×(n>>res).
func periodize(f []float64, m, n, res int) []float64 {
	k := 1 << res
	sm, sn := m/k, n/k
	startX, lenX := int(float64(m)*math.Exp2(float64(-res-1))), int(float64(m)*(1-math.Exp2(float64(-res))))
	startY, lenY := int(float64(n)*math.Exp2(float64(-res-1))), int(float64(n)*(1-math.Exp2(float64(-res))))
	out := make([]float64, sm*sn)
	for x := 0; x < m; x++ {
		if x >= startX && x < startX+lenX {
			continue
		}
		for y := 0; y < n; y++ {
			if y >= startY && y < startY+lenY {
				continue
			}
			out[(x%sm)*sn+y%sn] += f[x*n+y]
		}
	}
	return out
}

// plans holds one FFT plan per length and a column buffer.
type plans struct {
	fft map[int]*fourier.CmplxFFT
	col []complex128
}

func newPlans() *plans { return &plans{fft: map[int]*fourier.CmplxFFT{}} }

func (p *plans) plan(n int) *fourier.CmplxFFT {
	f, ok := p.fft[n]
	if !ok {
		f = fourier.NewCmplxFFT(n)
		p.fft[n] = f
	}
	return f
}

// fft2 transforms the m×n array x in place: the DFT, or with inv the inverse DFT (scaled by
// 1/(m·n), as numpy's ifft2).
func (p *plans) fft2(x []complex128, m, n int, inv bool) {
	fr, fc := p.plan(n), p.plan(m)
	for i := 0; i < m; i++ {
		row := x[i*n : (i+1)*n]
		if inv {
			fr.Sequence(row, row)
		} else {
			fr.Coefficients(row, row)
		}
	}
	if cap(p.col) < m {
		p.col = make([]complex128, m)
	}
	col := p.col[:m]
	for k := 0; k < n; k++ {
		for i := 0; i < m; i++ {
			col[i] = x[i*n+k]
		}
		if inv {
			fc.Sequence(col, col)
		} else {
			fc.Coefficients(col, col)
		}
		for i := 0; i < m; i++ {
			x[i*n+k] = col[i]
		}
	}
	if inv {
		s := complex(1/float64(m*n), 0)
		for i := range x {
			x[i] *= s
		}
	}
}

// Workspace is one goroutine's buffers for Apply.
type Workspace struct {
	p          *plans
	u0, u1, u2 []complex128
	s          []complex128
	keep       [][]complex128 // order-1 spectra kept for order 2
}

// NewWorkspace returns buffers for Apply.
func (t *Transform) NewWorkspace() *Workspace {
	n := t.mp * t.np
	ws := &Workspace{p: newPlans(), u0: make([]complex128, n), u1: make([]complex128, n), u2: make([]complex128, n), s: make([]complex128, n)}
	for _, j := range t.psiJ {
		var k []complex128
		if j < t.J-1 {
			k = make([]complex128, (t.mp>>j)*(t.np>>j))
		}
		ws.keep = append(ws.keep, k)
	}
	return ws
}

// mulSub sets dst, (m/k)×(n/k), to the spectrum src⊙f (m×n) periodized by k: the spectrum of
// the product's inverse transform subsampled by k (Kymatio's subsample_fourier, the mean of
// the k² aliases).
func mulSub(dst, src []complex128, f []float64, m, n, k int) {
	sm, sn := m/k, n/k
	inv := complex(1/float64(k*k), 0)
	for a := 0; a < sm; a++ {
		for b := 0; b < sn; b++ {
			var acc complex128
			for i := 0; i < k; i++ {
				row := (i*sm + a) * n
				for j := 0; j < k; j++ {
					q := row + j*sn + b
					acc += src[q] * complex(f[q], 0)
				}
			}
			dst[a*sn+b] = acc * inv
		}
	}
}

// Apply writes the scattering coefficients of one H×W channel img (row-major) into dst:
// Maps() maps of OutH()×OutW(), in Kymatio's order (order 0; then order 1, wavelet n = j·L + θ
// in turn; then order 2, for each n1 the n2 of larger scale in turn). Every map of dst depends
// on img alone.
func (t *Transform) Apply(ws *Workspace, dst, img []float64) {
	if len(img) != t.H*t.W || len(dst) != t.maps*t.outH*t.outW {
		panic(fmt.Sprintf("scatter: Apply: image of %d values (want %d), dst of %d (want %d)", len(img), t.H*t.W, len(dst), t.maps*t.outH*t.outW))
	}
	mp, np, J := t.mp, t.np, t.J
	u0 := ws.u0
	for i := 0; i < mp; i++ {
		si := reflect(i-t.padTop, t.H)
		for k := 0; k < np; k++ {
			u0[i*np+k] = complex(img[si*t.W+reflect(k-t.padLeft, t.W)], 0)
		}
	}
	ws.p.fft2(u0, mp, np, false)
	plane := t.outH * t.outW
	out := 0
	// low writes map `out` from the spectrum u (mp>>res × np>>res): ⋆φ, subsampled to 2^J.
	low := func(u []complex128, res int) {
		m, n, k := mp>>res, np>>res, 1<<(J-res)
		sm, sn := m/k, n/k
		s := ws.s[:sm*sn]
		mulSub(s, u, t.phi[res], m, n, k)
		ws.p.fft2(s, sm, sn, true)
		d := dst[out*plane : (out+1)*plane]
		for a := 0; a < t.outH; a++ {
			for b := 0; b < t.outW; b++ {
				d[a*t.outW+b] = real(s[(a+1)*sn+b+1])
			}
		}
		out++
	}
	low(u0, 0)
	// modulus replaces the spectrum u (m×n) by the modulus of its inverse transform.
	modulus := func(u []complex128, m, n int) {
		ws.p.fft2(u, m, n, true)
		for i, v := range u[:m*n] {
			u[i] = complex(cmplx.Abs(v), 0)
		}
	}
	// lowSpatial writes map `out` from the spatial map u (real, at resolution res).
	lowSpatial := func(u []complex128, res int) {
		if l := t.lows[res]; l != nil {
			l.apply(dst[out*plane:(out+1)*plane], u, ws.s, t.outH, t.outW)
			out++
			return
		}
		ws.p.fft2(u, mp>>res, np>>res, false)
		low(u, res)
	}
	nPsi := len(t.psi)
	// Order 1, keeping the spectra of |x ⋆ ψ_{n1}| that order 2 needs (order 2 comes after all
	// of order 1 in Kymatio's order).
	for n1 := 0; n1 < nPsi; n1++ {
		j1 := t.psiJ[n1]
		m, n := mp>>j1, np>>j1
		u1 := ws.u1[:m*n]
		if ws.keep[n1] != nil {
			u1 = ws.keep[n1]
		}
		mulSub(u1, u0, t.psi[n1][0], mp, np, 1<<j1)
		modulus(u1, m, n)
		if ws.keep[n1] == nil {
			lowSpatial(u1, j1)
			continue
		}
		ws.p.fft2(u1, m, n, false)
		low(u1, j1)
	}
	for n1 := 0; n1 < nPsi; n1++ {
		j1 := t.psiJ[n1]
		u1 := ws.keep[n1]
		if u1 == nil {
			continue
		}
		m, n := mp>>j1, np>>j1
		for n2 := 0; n2 < nPsi; n2++ {
			j2 := t.psiJ[n2]
			if j2 <= j1 {
				continue
			}
			m2, n2s := mp>>j2, np>>j2
			u2 := ws.u2[:m2*n2s]
			mulSub(u2, u1, t.psi[n2][j1], m, n, 1<<(j2-j1))
			modulus(u2, m2, n2s)
			lowSpatial(u2, j2)
		}
	}
}

// reflect maps index i of the padded signal onto 0..n−1, reflecting about the first and last
// samples without repeating them (numpy's "reflect" padding), periodically for pads ≥ n.
func reflect(i, n int) int {
	if n == 1 {
		return 0
	}
	p := 2 * (n - 1)
	i %= p
	if i < 0 {
		i += p
	}
	if i >= n {
		i = p - i
	}
	return i
}
