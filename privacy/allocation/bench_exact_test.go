package allocation

import "testing"

func benchmarkExactTV(b *testing.B, sigma float64, m int) {
	for i := 0; i < b.N; i++ {
		if _, err := ExactTVEpoch(sigma, m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExactTVEpochM10(b *testing.B)   { benchmarkExactTV(b, 1, 10) }
func BenchmarkExactTVEpochM1000(b *testing.B) { benchmarkExactTV(b, 1, 1000) }
func BenchmarkExactTVEpochM1e6(b *testing.B)  { benchmarkExactTV(b, 1, 1000000) }

func BenchmarkExactDeltaEpochM16384(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := ExactDeltaEpoch(0.75, 16384, 0.1); err != nil {
			b.Fatal(err)
		}
	}
}

func benchmarkExactDelta(b *testing.B, sigma float64, m, e int) {
	for i := 0; i < b.N; i++ {
		if _, err := ExactDelta(sigma, m, e, 0.5); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExactDeltaS1M1000E100(b *testing.B)   { benchmarkExactDelta(b, 1, 1000, 100) }
func BenchmarkExactDeltaS05M100E100(b *testing.B)   { benchmarkExactDelta(b, 0.5, 100, 100) }
func BenchmarkExactDeltaS2M1e6E100(b *testing.B)    { benchmarkExactDelta(b, 2, 1000000, 100) }
func BenchmarkExactDeltaS075M16384E10(b *testing.B) { benchmarkExactDelta(b, 0.75, 16384, 10) }

// BenchmarkExactAccountantPerEpoch: one Delta per new epoch count after the
// per-epoch PLD is cached (one composition each).
func BenchmarkExactAccountantPerEpoch(b *testing.B) {
	a, err := NewExactAccountant(1, 1000)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := a.Delta(1000, 0.5); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := a.Delta(1000*(2+i%50), 0.5); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExactAccountantCached: a repeated query at a cached epoch count.
func BenchmarkExactAccountantCached(b *testing.B) {
	a, err := NewExactAccountant(1, 1000)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := a.Delta(50000, 0.5); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := a.Delta(50000, 0.5); err != nil {
			b.Fatal(err)
		}
	}
}
