package privacy_test

import (
	"fmt"
	"log"

	"github.com/dpsgd/dpsgd/privacy"
)

// The TF Privacy MNIST tutorial setting: 60000 examples, expected batch 256,
// σ = 1.12, 60 epochs, δ = 1e-5; TF Privacy reports ε = 2.92 with the classic
// conversion over its orders. The accountant itself uses the improved one.
func ExampleNewPoissonRDP() {
	var orders []float64
	for x := 1; x < 100; x++ {
		orders = append(orders, 1+float64(x)/10)
	}
	for a := 12; a < 64; a++ {
		orders = append(orders, float64(a))
	}
	acc, err := privacy.NewPoissonRDP(256.0/60000, 1.12, orders)
	if err != nil {
		log.Fatal(err)
	}
	eps, _, err := acc.EpsilonClassic(60*(60000/256), 1e-5)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("classic ε = %.2f\n", eps)
	// Output: classic ε = 2.92
}

// μ-GDP to (ε, δ): δ(ε) of Dong, Roth & Su 2019, Cor. 2.13, solved for ε
// (reference values computed independently).
func ExampleGaussianEpsilon() {
	for _, mu := range []float64{0.5, 1, 2} {
		eps, err := privacy.GaussianEpsilon(mu, 1e-5)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("μ = %g: ε = %.4f\n", mu, eps)
	}
	// Output:
	// μ = 0.5: ε = 1.9931
	// μ = 1: ε = 4.3772
	// μ = 2: ε = 9.9973
}

// A per-epoch budget check with the amplification-free accountant of a
// shuffling sampler, after calibrating σ for the whole run.
func ExampleBudget_Check() {
	const stepsPerEpoch, epochs = 234, 20
	budget := privacy.Budget{Epsilon: 3, Delta: 1e-5}
	newAcc := func(sigma float64) (privacy.Accountant, error) {
		return privacy.NewGaussianEpochs(sigma, stepsPerEpoch, privacy.SamplerShuffle)
	}
	sigma, err := privacy.CalibrateSigma(newAcc, epochs*stepsPerEpoch, budget, 0.1, 100)
	if err != nil {
		log.Fatal(err)
	}
	acc, _ := newAcc(sigma)
	for epoch := 1; epoch <= epochs+1; epoch++ {
		eps, within, err := budget.Check(acc, epoch*stepsPerEpoch)
		if err != nil {
			log.Fatal(err)
		}
		if !within {
			fmt.Printf("epoch %d would spend ε = %.3f > %g: stop\n", epoch, eps, budget.Epsilon)
			break
		}
	}
}
