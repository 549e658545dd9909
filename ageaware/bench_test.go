package ageaware

import (
	"context"
	"testing"
)

func BenchmarkNewProblemPaper(b *testing.B) {
	cfg := PaperConfig()
	for b.Loop() {
		if _, err := NewProblem(cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// benchObjective returns the bound or exact-loss objective at ε̄ = 0.1.
func benchObjective(b *testing.B, kind string) (*Problem, Objective) {
	p := mustProblem(b, PaperConfig())
	lv, err := p.level(0.1)
	if err != nil {
		b.Fatal(err)
	}
	epsC, eta := make([]float64, p.m), make([]float64, p.m)
	return p, func(ages []int) float64 {
		p.scales(lv, NoiseAdaptive, ages, epsC, eta)
		if kind == "bound" {
			return p.bound(ages, eta, nil)
		}
		return p.expectedLoss(ages, eta)
	}
}

// BenchmarkBound is one evaluation of Theorem 1's bound (moments cached).
func BenchmarkBound(b *testing.B) {
	_, obj := benchObjective(b, "bound")
	ages := []int{3, 9, 14}
	obj(ages)
	for b.Loop() {
		obj(ages)
	}
}

func BenchmarkExpectedLoss(b *testing.B) {
	_, obj := benchObjective(b, "exact")
	ages := []int{3, 9, 14}
	obj(ages)
	for b.Loop() {
		obj(ages)
	}
}

// BenchmarkUploadMoments is one uncached pass over a client's lattice
// (the moments of its projected noisy upload and its covariances).
func BenchmarkUploadMoments(b *testing.B) {
	p := mustProblem(b, PaperConfig())
	c := p.clients[0]
	eta := 1.0
	for b.Loop() {
		eta += 1e-9
		c.moments(eta)
	}
}

func BenchmarkSimulate1000(b *testing.B) {
	p := mustProblem(b, PaperConfig())
	for b.Loop() {
		if _, err := p.Simulate(context.Background(), 1000, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCachedLoss is one schedule's Monte Carlo loss over 2000 trials.
func BenchmarkCachedLoss(b *testing.B) {
	p := mustProblem(b, PaperConfig())
	s, err := p.Simulate(context.Background(), 2000, 1)
	if err != nil {
		b.Fatal(err)
	}
	c := s.newLossCache()
	ages, eta := []int{3, 9, 14}, []float64{1, 2, 3}
	c.loss(ages, eta)
	for b.Loop() {
		c.loss(ages, eta)
	}
}

func BenchmarkExhaustiveBound(b *testing.B) {
	p, obj := benchObjective(b, "bound")
	for b.Loop() {
		if _, err := p.Exhaustive(context.Background(), obj); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCoordinateDescentBound(b *testing.B) {
	p, obj := benchObjective(b, "bound")
	for b.Loop() {
		if _, err := p.CoordinateDescent(context.Background(), obj, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunQuick is the experiment of dpsgd ageaware simulate --quick.
func BenchmarkRunQuick(b *testing.B) {
	p := mustProblem(b, PaperConfig())
	for b.Loop() {
		if _, err := p.Run(context.Background(), RunConfig{Eps: []float64{0.03, 0.3, 3}, Trials: 400, SearchTrials: 200, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}
