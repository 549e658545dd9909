package ball_test

import (
	"fmt"
	"log"

	"github.com/dpsgd/dpsgd/privacy/ball"
)

// One step of ball noise: in one dimension δ = Δ/(2r); in three, one minus
// the overlap of two balls, (4r + Δ)(2r − Δ)²/(16r³), which is 11/16 for
// Δ = r = 1.
func ExampleStepDelta() {
	for _, d := range []int{1, 3} {
		delta, err := ball.StepDelta(d, 1, 1)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("d = %d: δ = %.4f\n", d, delta)
	}
	// Output:
	// d = 1: δ = 0.5000
	// d = 3: δ = 0.6875
}

// Tholeti's Algorithm 1 in one dimension: one of N = 100 points per step,
// so each step is (0, δ/N)-DP with δ = Δ/(2r) = 0.01; over T = 10 steps the
// paper's sum gives T·δ/N = 0.001 and the exact composition
// 1 − (1 − 1e-4)¹⁰ = 1e-3 − 45e-8 + 120e-12 − … = 0.00099955.
func ExampleComposeExact() {
	step, _ := ball.StepDelta(1, 0.02, 1)
	unit, _ := ball.Amplify(step, 100)
	sum, _ := ball.ComposeSum(unit, 10)
	exact, _ := ball.ComposeExact(unit, 10)
	fmt.Printf("sum %.6g, exact %.6g\n", sum, exact)
	// Output: sum 0.001, exact 0.00099955
}
