package personalized_test

import (
	"fmt"

	"github.com/dpsgd/dpsgd/privacy/personalized"
)

// A client asking for (ε, δ') = (0.5, 1e−5), drawn with probability 0.01 in
// each of T = 1000 draws, averaging m = 100 clipped gradients (C = 1).
func ExampleCalibrate() {
	c := personalized.Client{Epsilon: 0.5, DeltaPrime: 1e-5, DeltaTail: 1e-5, SampleRate: 0.01}
	s := personalized.Setting{Draws: 1000, Clip: 1, LocalExamples: 100, LocalSteps: 1}
	cal, err := personalized.Calibrate(c, s)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("R = %d (logistic %.2f, exact %d)\n", cal.Rounds.Used, cal.Rounds.Logistic, cal.Rounds.Exact)
	fmt.Printf("σ seed = %.4f (proven: %v), σ GDP = %.4f\n", cal.SigmaSeed, cal.SeedValid, cal.SigmaGDP)
	eps, _ := personalized.Spent(cal.Rounds.Used, s.LocalSteps, cal.Multiplier, c.DeltaPrime)
	fmt.Printf("ε spent after R selections = %.4f; δ if retirement is not enforced = %.6g\n", eps, cal.DeltaTotal)
	// Output:
	// R = 32 (logistic 31.28, exact 26)
	// σ seed = 1.0963 (proven: true), σ GDP = 0.7956
	// ε spent after R selections = 0.5000; δ if retirement is not enforced = 1.99999e-05
}
