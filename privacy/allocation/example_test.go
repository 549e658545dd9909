package allocation_test

import (
	"fmt"

	"github.com/dpsgd/dpsgd/privacy/allocation"
)

// van Dijk & Ertan's worked example (σ = 1, δ = 0.01, one epoch) and the certified
// chi-square rounds for the same target.
func ExampleBerryEsseenRounds() {
	be, _ := allocation.BerryEsseenRounds(1, 0.01, 1, allocation.RhoSimplified)
	chi, _ := allocation.ChiSquareRounds(1, 0.01, 1)
	fmt.Printf("Berry–Esseen M ≈ %.4g, chi-square M = %d\n", float64(be), chi)
	// Output: Berry–Esseen M ≈ 1.14e+06, chi-square M = 4296
}
