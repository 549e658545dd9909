package allocation

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/dpsgd/dpsgd/internal/numeric"
	"github.com/dpsgd/dpsgd/privacy"
)

// refExactSigma and refExactRounds are ExactSigma and ExactRounds as they were written before
// their common start moved into tvBracket, with exactTVFunc made a parameter: the oracle of
// TestTVBracketBitIdentical.
func refExactSigma(tvf tvFunc, tv float64, rounds, epochs int) (float64, error) {
	if err := checkSigmaSolve(tv, rounds, epochs); err != nil {
		return 0, err
	}
	hi, err := ChiSquareSigma(tv, rounds, epochs)
	if err != nil {
		return 0, err
	}
	ok := func(s float64) (bool, error) {
		v, err := tvf(s, rounds, epochs)
		return v <= tv, err
	}
	_, hi, found, err := numeric.Bracket(ok, 0, hi, func(i int, h float64) (float64, bool) { return h * 1.25, i < 30 })
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("allocation: ExactSigma: tv = %g not certified by any sigma up to %g (rounds = %d, epochs = %d): %w",
			tv, hi, rounds, epochs, privacy.ErrUnreachable)
	}
	lo := hi / 2
	for {
		good, err := ok(lo)
		if err != nil {
			return 0, err
		}
		if !good {
			break
		}
		hi, lo = lo, lo/2
		if lo < 1e-3 {
			return hi, nil
		}
	}
	return numeric.BisectGeometric(ok, lo, hi, 1e-4)
}

func refExactRounds(tvf tvFunc, sigma, tv float64, epochs int) (int, error) {
	if err := checkRoundsSolve(sigma, "tv", tv, epochs); err != nil {
		return 0, err
	}
	hi, err := ChiSquareRounds(sigma, tv, epochs)
	if err != nil {
		return 0, err
	}
	ok := func(m int) (bool, error) {
		v, err := tvf(sigma, m, epochs)
		return v <= tv, err
	}
	_, hi, found, err := numeric.Bracket(ok, 0, hi, func(i, h int) (int, bool) { return h + h/4 + 1, i < 20 && h <= 1<<40 })
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("allocation: ExactRounds: tv = %g not certified up to rounds = %d (sigma = %g, epochs = %d): %w",
			tv, hi, sigma, epochs, privacy.ErrUnreachable)
	}
	if good, err := ok(1); err != nil {
		return 0, err
	} else if good {
		return 1, nil
	}
	return numeric.BisectInt(ok, 1, hi)
}

// TestTVBracketBitIdentical: ExactSigma and ExactRounds give bit for bit the numbers and the
// errors of their form before tvBracket, on a grid, with TV functions that are cheap stand-ins
// (monotone like the certified TV, one that never certifies, one that fails) and with the real
// one where it is a closed form (M = 1).
func TestTVBracketBitIdentical(t *testing.T) {
	boom := errors.New("tv failed")
	tvfs := map[string]tvFunc{
		"gauss-like": func(s float64, m, e int) (float64, error) {
			return math.Erf(math.Sqrt(float64(e)/math.Sqrt(float64(m))) / (2 * s * math.Sqrt2)), nil
		},
		"steep": func(s float64, m, e int) (float64, error) {
			return math.Min(1, float64(e)/(s*s*float64(m))), nil
		},
		"never":  func(float64, int, int) (float64, error) { return 1, nil },
		"failer": func(float64, int, int) (float64, error) { return 0, boom },
		"real":   exactTVFunc,
	}
	same := func(what string, a, b any, ea, eb error) {
		t.Helper()
		if a != b || (ea == nil) != (eb == nil) || (ea != nil && (ea.Error() != eb.Error() || errors.Is(ea, privacy.ErrUnreachable) != errors.Is(eb, privacy.ErrUnreachable))) {
			t.Errorf("%s: %v (%v), before %v (%v)", what, a, ea, b, eb)
		}
	}
	n := 0
	for name, tvf := range tvfs {
		for _, tv := range []float64{0.9, 0.3, 0.05, 1e-3} {
			for _, e := range []int{1, 2, 7} {
				for _, m := range []int{1, 2, 50, 4000} {
					if name == "real" && m > 1 {
						continue // the exact TV of M > 1 takes seconds a point
					}
					s, err := exactSigma(tvf, tv, m, e)
					rs, rerr := refExactSigma(tvf, tv, m, e)
					same(fmt.Sprintf("%s σ(tv %v, M %d, E %d)", name, tv, m, e), math.Float64bits(s), math.Float64bits(rs), err, rerr)
					n++
				}
				if name == "real" {
					continue
				}
				for _, sigma := range []float64{0.7, 1.5, 4, 20} {
					m, err := exactRounds(tvf, sigma, tv, e)
					rm, rerr := refExactRounds(tvf, sigma, tv, e)
					same(fmt.Sprintf("%s M(σ %v, tv %v, E %d)", name, sigma, tv, e), m, rm, err, rerr)
					n++
				}
			}
		}
	}
	if n < 300 {
		t.Fatalf("%d comparisons", n)
	}
}
