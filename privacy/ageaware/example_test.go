package ageaware_test

import (
	"fmt"

	"github.com/dpsgd/dpsgd/privacy/ageaware"
)

// A two-state chain forgets at rate |1 − p − q|: Δ(t) = 0.7ᵗ for p = 0.1,
// q = 0.2. Data three steps old need ε_c ≈ 1.79 for a target ε̄ = 1 instead
// of ε_c = 1 for fresh data (eq. 4).
func Example() {
	c, err := ageaware.NewChain([][]float64{{0.9, 0.1}, {0.2, 0.8}})
	if err != nil {
		panic(err)
	}
	d, _ := c.Delta(3)
	epsC, _, _ := ageaware.AdaptiveEpsC(d, 1)
	eps, _ := ageaware.Epsilon(d, epsC)
	eta, _ := ageaware.LaplaceScale(1.8, epsC)
	fmt.Printf("Δ(3) = %.3f, ε_c = %.4f, ε(3, ε_c) = %.4f, η = %.4f\n", d, epsC, eps, eta)
	// Output: Δ(3) = 0.343, ε_c = 1.7934, ε(3, ε_c) = 1.0000, η = 1.0037
}
