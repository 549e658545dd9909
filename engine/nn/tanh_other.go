//go:build !amd64 || noasm || purego

package nn

const tanhAVX512 = false

func tanh32AVX512(dst, src *float32, n int, c *tanhConstants) {
	panic("nn: no AVX-512 kernel in this build")
}
