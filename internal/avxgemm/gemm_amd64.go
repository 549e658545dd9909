//go:build !noasm && !purego

package avxgemm

import "golang.org/x/sys/cpu"

// hasAVX512 and hasAVX2 are whether the CPU and the OS support the AVX-512F kernels and the
// AVX2 ones (which also use FMA and POPCNT).
var (
	hasAVX512 = cpu.X86.HasAVX512F
	hasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasPOPCNT
)

// missing says why the kernels cannot run when they are not available.
const missing = "this CPU has neither AVX-512F nor AVX2 with FMA (or the OS does not enable them)"

// The micro-kernels of gemm_amd64.s (see asmgen/main.go). Each computes rows 0 … mr−1 of one
// 16-row tile of C and the columns of mask (one 64-byte vector) over kc values of k: the
// direct kernels read A's 16 rows in place at stride lda, the packed ones element (i, k) at
// a[k·ks + i]; b is a packed panel, b[k·NR + j]. mode 0 stores α·s, mode 1 α·s + β·C.

//go:noescape
func sgemmDirect(kc int, a *float32, lda int, b *float32, c *float32, ldc int, mr int, mask uint64, alpha, beta float32, mode int)

//go:noescape
func sgemmPacked(kc int, a *float32, ks int, b *float32, c *float32, ldc int, mr int, mask uint64, alpha, beta float32, mode int)

//go:noescape
func dgemmDirect(kc int, a *float64, lda int, b *float64, c *float64, ldc int, mr int, mask uint64, alpha, beta float64, mode int)

//go:noescape
func dgemmPacked(kc int, a *float64, ks int, b *float64, c *float64, ldc int, mr int, mask uint64, alpha, beta float64, mode int)

//go:noescape
func sgemmDirectAVX2(kc int, a *float32, lda int, b *float32, c *float32, ldc int, mr int, mask uint64, alpha, beta float32, mode int)

//go:noescape
func sgemmPackedAVX2(kc int, a *float32, ks int, b *float32, c *float32, ldc int, mr int, mask uint64, alpha, beta float32, mode int)

//go:noescape
func dgemmDirectAVX2(kc int, a *float64, lda int, b *float64, c *float64, ldc int, mr int, mask uint64, alpha, beta float64, mode int)

//go:noescape
func dgemmPackedAVX2(kc int, a *float64, ks int, b *float64, c *float64, ldc int, mr int, mask uint64, alpha, beta float64, mode int)
