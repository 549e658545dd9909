//go:build !amd64 || noasm

package kernels

// avxParams is empty where the AVX2 kernel is not built (other architectures
// or the noasm build tag); the pure-Go path computes the same stream.
type avxParams struct{}

func fastParams(*philoxStream, uint64) *avxParams { return nil }

func normalsFast(*avxParams, []float64, uint32) int { return 0 }

func applyFast[T Float]([]T, []float64, float64, bool) int { return 0 }
