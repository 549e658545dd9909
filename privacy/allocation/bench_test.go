package allocation

import "testing"

var cfBenchSink float64

func BenchmarkChiSquareTV(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		v, _ := ChiSquareTV(1.1, 10000, 1+i%50)
		cfBenchSink += v
	}
}

func BenchmarkChiSquareAccountantDelta(b *testing.B) {
	a, _ := NewChiSquareAccountant(1.1, 10000)
	for i := 0; b.Loop(); i++ {
		v, _ := a.Delta(10000*(1+i%50), 1)
		cfBenchSink += v
	}
}

func BenchmarkChiSquareSigma(b *testing.B) {
	for b.Loop() {
		v, _ := ChiSquareSigma(0.05, 10000, 20)
		cfBenchSink += v
	}
}

func BenchmarkBerryEsseenDeltaSimplified(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		v, _ := BerryEsseenDelta(1, 1000000, 1+i%50, RhoSimplified)
		cfBenchSink += v
	}
}

func BenchmarkBerryEsseenDeltaExact(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		v, _ := BerryEsseenDelta(1, 1000000, 1+i%50, RhoExact)
		cfBenchSink += v
	}
}

func BenchmarkBerryEsseenAccountantDelta(b *testing.B) {
	a, _ := NewBerryEsseenAccountant(1, 1000000, RhoExact)
	for i := 0; b.Loop(); i++ {
		v, _ := a.Delta(1000000*(1+i%50), 1)
		cfBenchSink += v
	}
}

func BenchmarkBerryEsseenRounds(b *testing.B) {
	for b.Loop() {
		m, _ := BerryEsseenRounds(1, 0.01, 1, RhoSimplified)
		cfBenchSink += float64(m)
	}
}

func BenchmarkBerryEsseenOptimalSigma(b *testing.B) {
	for b.Loop() {
		s, _, _ := BerryEsseenOptimalSigma(0.01, 1, RhoSimplified)
		cfBenchSink += s
	}
}

func BenchmarkRDPDefaultOrders(b *testing.B) {
	o := DefaultRDPOrders()
	for b.Loop() {
		r, _ := RDP(1, 10000, o)
		cfBenchSink += r[0]
	}
}

func BenchmarkRDPOrders64(b *testing.B) {
	o := DefaultRDPOrders()[:63]
	for b.Loop() {
		r, _ := RDP(1, 10000, o)
		cfBenchSink += r[0]
	}
}

func BenchmarkRDPAccountantEpsilon(b *testing.B) {
	a, _ := NewRDPAccountant(1, 10000, nil)
	for i := 0; b.Loop(); i++ {
		v, _ := a.Epsilon(10000*(1+i%50), 1e-5)
		cfBenchSink += v
	}
}

func BenchmarkRDPAccountantDelta(b *testing.B) {
	a, _ := NewRDPAccountant(1, 10000, nil)
	for i := 0; b.Loop(); i++ {
		v, _ := a.Delta(10000*(1+i%50), 1)
		cfBenchSink += v
	}
}
