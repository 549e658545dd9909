//go:build !noasm && !purego

package avxgemm

import "golang.org/x/sys/cpu"

// available is whether the CPU and the OS support the AVX-512F kernels.
var available = cpu.X86.HasAVX512F

// missing says why the kernels cannot run when they are not available.
const missing = "this CPU has no AVX-512F (or the OS does not enable it)"

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
