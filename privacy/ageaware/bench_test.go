package ageaware

import "testing"

func BenchmarkDelta(b *testing.B) {
	c := mustChain(b, birthDeath(0.1, 0.2))
	for b.Loop() {
		if _, err := c.Delta(37); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDeltaCurve64(b *testing.B) {
	c := mustChain(b, birthDeath(0.1, 0.2))
	for b.Loop() {
		if _, err := c.DeltaCurve(64); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSpectralBound(b *testing.B) {
	c := mustChain(b, birthDeath(0.1, 0.2))
	for b.Loop() {
		if _, err := c.SpectralBound(37); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewChain(b *testing.B) {
	rows := birthDeath(0.4, 0.4)
	for b.Loop() {
		if _, err := NewChain(rows); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAdaptiveEpsC(b *testing.B) {
	s := 0.0
	for b.Loop() {
		c, _, _ := AdaptiveEpsC(0.3, 0.5)
		s += c
	}
	_ = s
}
