//go:build !amd64 || noasm || purego

package avxgemm

const (
	hasAVX512 = false
	hasAVX2   = false
)

// missing says why the kernels cannot run.
const missing = "this build has no AVX-512 kernels (not amd64, or built with the noasm or purego tag)"

func sgemmDirect(kc int, a *float32, lda int, b *float32, c *float32, ldc int, mr int, mask uint64, alpha, beta float32, mode int) {
	panic("avxgemm: no kernels on this platform")
}

func sgemmPacked(kc int, a *float32, ks int, b *float32, c *float32, ldc int, mr int, mask uint64, alpha, beta float32, mode int) {
	panic("avxgemm: no kernels on this platform")
}

func dgemmDirect(kc int, a *float64, lda int, b *float64, c *float64, ldc int, mr int, mask uint64, alpha, beta float64, mode int) {
	panic("avxgemm: no kernels on this platform")
}

func dgemmPacked(kc int, a *float64, ks int, b *float64, c *float64, ldc int, mr int, mask uint64, alpha, beta float64, mode int) {
	panic("avxgemm: no kernels on this platform")
}

func sgemmDirectAVX2(kc int, a *float32, lda int, b *float32, c *float32, ldc int, mr int, mask uint64, alpha, beta float32, mode int) {
	panic("avxgemm: no kernels on this platform")
}

func sgemmPackedAVX2(kc int, a *float32, ks int, b *float32, c *float32, ldc int, mr int, mask uint64, alpha, beta float32, mode int) {
	panic("avxgemm: no kernels on this platform")
}

func dgemmDirectAVX2(kc int, a *float64, lda int, b *float64, c *float64, ldc int, mr int, mask uint64, alpha, beta float64, mode int) {
	panic("avxgemm: no kernels on this platform")
}

func dgemmPackedAVX2(kc int, a *float64, ks int, b *float64, c *float64, ldc int, mr int, mask uint64, alpha, beta float64, mode int) {
	panic("avxgemm: no kernels on this platform")
}
