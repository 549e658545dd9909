package ageaware

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randomReversible returns P = D⁻¹W for a random symmetric W > 0 (n×n).
func randomReversible(rng *rand.Rand, n int) [][]float64 {
	w := make([][]float64, n)
	for i := range w {
		w[i] = make([]float64, n)
	}
	for x := 0; x < n; x++ {
		for y := x; y < n; y++ {
			v := rng.ExpFloat64() + 0.05
			w[x][y], w[y][x] = v, v
		}
	}
	for x := range w {
		s := 0.0
		for _, v := range w[x] {
			s += v
		}
		for y := range w[x] {
			w[x][y] /= s
		}
	}
	return w
}

func randomLaw(rng *rand.Rand, n int, zeros bool) []float64 {
	law := make([]float64, n)
	s := 0.0
	for i := range law {
		if !zeros || rng.IntN(3) > 0 || i == 0 {
			law[i] = rng.Float64() + 0.01
			s += law[i]
		}
	}
	for i := range law {
		law[i] /= s
	}
	return law
}

// randomConfig is a small federation with integer-valued states.
func randomConfig(rng *rand.Rand, m, states, samples, aggTime int, src DeltaSource) Config {
	cfg := Config{AggTime: aggTime, Delta: src}
	for range m {
		values := make([]float64, states)
		for i := range values {
			values[i] = float64(rng.IntN(20)) + float64(i)*0.5
		}
		cfg.Clients = append(cfg.Clients, Client{
			Chain:   randomReversible(rng, states),
			Values:  values,
			Init:    randomLaw(rng, states, true),
			Samples: samples + rng.IntN(3),
		})
	}
	return cfg
}

func mustProblem(t testing.TB, cfg Config) *Problem {
	t.Helper()
	p, err := NewProblem(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// allAges calls f on every schedule's ages.
func allAges(m, T int, f func(ages []int)) {
	ages := make([]int, m)
	for {
		f(ages)
		i := 0
		for i < m && ages[i] == T {
			ages[i] = 0
			i++
		}
		if i == m {
			return
		}
		ages[i]++
	}
}

func approxEq(a, b, rel, abs float64) bool {
	return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b))+abs
}
