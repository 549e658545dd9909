package sampler_test

import (
	"fmt"

	"github.com/dpsgd/dpsgd/engine/sampler"
)

// One epoch of shuffling 10 examples in batches of 4, each logical batch cut
// into physical batches of 3 rows: 2 steps (2 examples sit out), each of 2
// physical batches with 4 real rows and 2 padding rows.
func ExampleChunks() {
	s, err := sampler.NewShuffle(10, 4, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	var idx, rows []int
	var mask []float64
	for step := 0; step < s.StepsPerEpoch(); step++ {
		idx = s.Batch(0, step, idx)
		var k int
		rows, mask, k = sampler.Chunks(idx, 3, rows, mask)
		real := 0.0
		for _, m := range mask {
			real += m
		}
		fmt.Printf("step %d: %d physical batches, %d rows, %g real\n", step, k, len(rows), real)
	}
	// Output:
	// step 0: 2 physical batches, 6 rows, 4 real
	// step 1: 2 physical batches, 6 rows, 4 real
}

// A Poisson sampler's batches are reproducible from the seed alone.
func ExampleNewPoisson() {
	a, _ := sampler.NewPoisson(1000, 0.01, 42)
	b, _ := sampler.NewPoisson(1000, 0.01, 42)
	fmt.Println(a.StepsPerEpoch(), a.ExpectedBatchSize())
	fmt.Println(fmt.Sprint(a.Batch(5, 17, nil)) == fmt.Sprint(b.Batch(5, 17, nil)))
	// Output:
	// 100 10
	// true
}
