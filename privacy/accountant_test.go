package privacy

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestBudgetCheck(t *testing.T) {
	p, _ := NewPoissonRDP(0.01, 1, nil)
	b := Budget{Epsilon: 3, Delta: 1e-5}
	for _, T := range []int{100, 1000, 10000} {
		eps, within, err := b.Check(p, T)
		want, _ := p.Epsilon(T, 1e-5)
		if err != nil || eps != want || within != (want <= 3) {
			t.Errorf("T=%d: (%g, %v, %v), want ε %g", T, eps, within, err, want)
		}
	}
	g, _ := NewGDPCLT(0.01, 1)
	if _, _, err := b.Check(g, 100); !errors.Is(err, ErrNotCertified) {
		t.Errorf("approximate accountant: err = %v", err)
	}
	for _, bad := range []Budget{{-1, 1e-5}, {math.NaN(), 1e-5}, {math.Inf(1), 1e-5}, {1, 0}, {1, 1}} {
		if _, _, err := bad.Check(p, 10); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("budget %v: err = %v", bad, err)
		}
	}
	if _, _, err := b.Check(nil, 10); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil accountant: err = %v", err)
	}
}

// TestCalibrateSigmaPoisson: the σ found meets the target and σ·(1 − 1e-4)
// does not.
func TestCalibrateSigmaPoisson(t *testing.T) {
	newAcc := func(s float64) (Accountant, error) { return NewPoissonRDP(0.01, s, nil) }
	for _, target := range []Budget{{1, 1e-5}, {3, 1e-5}, {8, 1e-6}} {
		sigma, err := CalibrateSigma(newAcc, 10000, target, 0.1, 100)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := newAcc(sigma)
		eps, _ := a.Epsilon(10000, target.Delta)
		a2, _ := newAcc(sigma * (1 - 1e-4))
		eps2, _ := a2.Epsilon(10000, target.Delta)
		if eps > target.Epsilon || eps2 <= target.Epsilon {
			t.Errorf("target %v: σ = %g gives ε %g; σ(1−1e-4) gives %g", target, sigma, eps, eps2)
		}
	}
}

// TestCalibrateSigmaGaussianEpochs against an independent solve: the μ with
// δ(ε) = δ found by bisection on μ (δ increases in μ), then σ = √E/μ.
func TestCalibrateSigmaGaussianEpochs(t *testing.T) {
	const epochs, spe = 20, 50
	target := Budget{Epsilon: 2, Delta: 1e-5}
	newAcc := func(s float64) (Accountant, error) { return NewGaussianEpochs(s, spe, SamplerAllocation) }
	sigma, err := CalibrateSigma(newAcc, epochs*spe, target, 0.1, 100)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := 1e-3, 100.0
	for i := 0; i < 200; i++ {
		mid := (lo + hi) / 2
		if d, _ := GaussianDelta(mid, target.Epsilon); d > target.Delta {
			hi = mid
		} else {
			lo = mid
		}
	}
	want := math.Sqrt(epochs) / lo
	if sigma < want || sigma > want*(1+1.5e-4) {
		t.Errorf("σ = %.8g, independent %.8g", sigma, want)
	}
}

func TestCalibrateSigmaErrors(t *testing.T) {
	newAcc := func(s float64) (Accountant, error) { return NewPoissonRDP(0.01, s, nil) }
	_, err := CalibrateSigma(newAcc, 10000, Budget{1e-3, 1e-5}, 0.1, 2)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "[0.1, 2]") {
		t.Errorf("unreachable: err = %v", err)
	}
	// Already met at lo.
	if s, err := CalibrateSigma(newAcc, 10, Budget{50, 1e-5}, 0.5, 10); s != 0.5 || err != nil {
		t.Errorf("met at lo: σ = %g, %v", s, err)
	}
	for _, c := range []struct{ lo, hi float64 }{{0, 1}, {1, 1}, {2, 1}, {1, math.Inf(1)}, {math.NaN(), 1}} {
		if _, err := CalibrateSigma(newAcc, 10, Budget{1, 1e-5}, c.lo, c.hi); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("range [%g, %g]: err = %v", c.lo, c.hi, err)
		}
	}
	if _, err := CalibrateSigma(nil, 10, Budget{1, 1e-5}, 0.1, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil newAcc: err = %v", err)
	}
	if _, err := CalibrateSigma(newAcc, -1, Budget{1, 1e-5}, 0.1, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("steps < 0: err = %v", err)
	}
	failing := func(s float64) (Accountant, error) { return NewPoissonRDP(2, s, nil) }
	if _, err := CalibrateSigma(failing, 10, Budget{1, 1e-5}, 0.1, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("constructor error not passed on: %v", err)
	}
	// A truncated sampler whose truncation alone exceeds δ is unreachable at every σ.
	trunc := func(s float64) (Accountant, error) { return NewTruncatedPoisson(0.01, s, 1000, 10, nil) }
	if _, err := CalibrateSigma(trunc, 100, Budget{1, 1e-5}, 0.1, 10); !errors.Is(err, ErrUnreachable) {
		t.Errorf("truncated: err = %v", err)
	}
}

// TestAccountantsInterface: every accountant satisfies Accountant, names the
// sampler it is proven for, and spends nothing in zero steps.
func TestAccountantsInterface(t *testing.T) {
	p, _ := NewPoissonRDP(0.01, 1, nil)
	tr, _ := NewTruncatedPoisson(0.01, 1, 10000, 200, nil)
	g, _ := NewGaussianEpochs(1, 10, SamplerShuffle)
	c, _ := NewGDPCLT(0.01, 1)
	want := map[string]string{"rdp": SamplerPoisson, "rdp+truncation": SamplerPoissonTruncated,
		"gaussian-epochs": SamplerShuffle, "gdp-clt (approximate)": SamplerPoisson}
	for _, a := range []Accountant{p, tr, g, c} {
		if want[a.Name()] != a.Sampler() {
			t.Errorf("%s: sampler %q", a.Name(), a.Sampler())
		}
		if IsApproximate(a) != (a.Name() == "gdp-clt (approximate)") {
			t.Errorf("%s: IsApproximate = %v", a.Name(), IsApproximate(a))
		}
		if e, err := a.Epsilon(0, 1e-5); e != 0 || err != nil {
			t.Errorf("%s: Epsilon(0) = %g, %v", a.Name(), e, err)
		}
		if d, err := a.Delta(0, 1); d != 0 || err != nil {
			t.Errorf("%s: Delta(0) = %g, %v", a.Name(), d, err)
		}
		if _, err := a.Epsilon(-1, 1e-5); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: steps < 0: %v", a.Name(), err)
		}
	}
}

// TestBudgetCheckTV: a total-variation budget (0, t) is decided by δ(0) = TV,
// and an ε that does not exist at δ is reported as +Inf, not an error.
func TestBudgetCheckTV(t *testing.T) {
	g, err := NewGaussianEpochs(2, 10, SamplerAllocation)
	if err != nil {
		t.Fatal(err)
	}
	tv, err := GaussianDelta(math.Sqrt(3)/2, 0) // 3 epochs
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		budget float64
		within bool
	}{{tv * 1.001, true}, {tv * 0.999, false}} {
		_, within, err := Budget{Epsilon: 0, Delta: c.budget}.Check(g, 30)
		if err != nil || within != c.within {
			t.Errorf("TV budget %g (TV %g): within = %v, %v", c.budget, tv, within, err)
		}
	}
}
