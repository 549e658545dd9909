package sampler

import "testing"

// benchSteps runs b.N consecutive steps of s (epoch after epoch) and reports
// the mean batch size. Per-epoch work (shuffle and allocation build their
// epoch once) is amortized over the epoch's steps.
func benchSteps(b *testing.B, s Sampler) {
	m := s.StepsPerEpoch()
	dst := make([]int, 0, 1024)
	total := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst = s.Batch(i/m, i%m, dst)
		total += len(dst)
	}
	b.ReportMetric(float64(total)/float64(b.N), "rows/op")
}

// BenchmarkPoissonN1e7 is the O(batch) check: N = 10⁷, q = 10⁻⁴, about 1000
// examples per step; O(N) would cost milliseconds.
func BenchmarkPoissonN1e7(b *testing.B) {
	benchSteps(b, must(NewPoisson(10_000_000, 1e-4, 1)))
}

// BenchmarkPoissonN1e9 has the same expected batch at 100× the N: the time
// per step must not grow with N.
func BenchmarkPoissonN1e9(b *testing.B) {
	benchSteps(b, must(NewPoisson(1_000_000_000, 1e-6, 1)))
}

// BenchmarkPoissonMNIST: N = 60000, expected batch 256.
func BenchmarkPoissonMNIST(b *testing.B) {
	benchSteps(b, must(NewPoisson(60000, 256.0/60000, 1)))
}

// BenchmarkTruncatedPoissonN1e7: N = 10⁷, q = 10⁻⁴ cut at 990, truncating
// about 60% of the steps.
func BenchmarkTruncatedPoissonN1e7(b *testing.B) {
	benchSteps(b, must(NewTruncatedPoisson(10_000_000, 1e-4, 990, 1)))
}

// BenchmarkShuffleMNIST: N = 60000, B = 256, per step including the
// amortized permutation (234 steps per epoch).
func BenchmarkShuffleMNIST(b *testing.B) {
	benchSteps(b, must(NewShuffle(60000, 256, 1)))
}

// BenchmarkAllocationMNIST: N = 60000, M = 234, per step including the
// amortized assignment.
func BenchmarkAllocationMNIST(b *testing.B) {
	benchSteps(b, must(NewAllocation(60000, 234, 1)))
}

// BenchmarkShuffleEpochN1e7 and BenchmarkAllocationEpochN1e7 time building
// one epoch at N = 10⁷ (the first step of a new epoch).
func BenchmarkShuffleEpochN1e7(b *testing.B) {
	s := must(NewShuffle(10_000_000, 1000, 1))
	var dst []int
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		dst = s.Batch(i, 0, dst)
	}
}

func BenchmarkAllocationEpochN1e7(b *testing.B) {
	s := must(NewAllocation(10_000_000, 10000, 1))
	var dst []int
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		dst = s.Batch(i, 0, dst)
	}
}

// BenchmarkChunks cuts a batch of 1000 into physical batches of 256.
func BenchmarkChunks(b *testing.B) {
	idx := seq(1000)
	var rows []int
	var mask []float64
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		rows, mask, _ = Chunks(idx, 256, rows, mask)
	}
}

// BenchmarkSecureBatch compares, in one run, default (PCG) and secure
// (ChaCha8 keyed by SHA-256) batch generation for each sampler at the MNIST
// sizes (N = 60000, expected batch 256), per step with per-epoch work
// amortized: the ratio of the two ns/op columns is secure mode's cost.
func BenchmarkSecureBatch(b *testing.B) {
	for _, c := range []struct {
		name string
		s    Sampler
	}{
		{NamePoisson, must(NewPoisson(60000, 256.0/60000, 1))},
		{NameTruncatedPoisson, must(NewTruncatedPoisson(60000, 256.0/60000, 300, 1))},
		{NameShuffle, must(NewShuffle(60000, 256, 1))},
		{NameAllocation, must(NewAllocation(60000, 234, 1))},
	} {
		b.Run(c.name+"/default", func(b *testing.B) { benchSteps(b, c.s) })
		b.Run(c.name+"/secure", func(b *testing.B) { benchSteps(b, must(Secure(c.s, testKey(1)))) })
	}
}
