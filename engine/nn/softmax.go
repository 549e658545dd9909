package nn

import "math"

// CrossEntropy is one example's softmax cross-entropy, −log softmax(z)[label] = lse(z) − z[label],
// in float64 with the row reduced by its own maximum, as the training loss (xentOp) computes it.
// label must index z.
func CrossEntropy[T float32 | float64](z []T, label int) float64 {
	m, s := rowMaxSum(z)
	return m + math.Log(s) - float64(z[label])
}

// Softmax writes softmax(z) into dst (len(dst) = len(z)), in float64 with the row reduced by its
// own maximum.
func Softmax[T float32 | float64](dst []float64, z []T) {
	m, s := rowMaxSum(z)
	for j, v := range z {
		dst[j] = math.Exp(float64(v)-m) / s
	}
}
