//go:build !amd64 || noasm || purego

package nn

const maxArgAVX512 = false

func maxArg32AVX512(o *float32, a *int32, src *float32, n int, at int32) {
	panic("nn: no AVX-512 kernel in this build")
}
