//go:build !noasm && !purego

package nn

import "golang.org/x/sys/cpu"

// tanhAVX512 is whether tanhSlice32 runs tanh32AVX512: AVX-512 F, DQ (the conversion of k to
// an integer) and VL (the 8-lane float32 loads and stores).
var tanhAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL

// tanh32AVX512 sets dst[i] = tanh32(src[i]) for i < n, 8 lanes per pass (tanh_amd64.s).
//
//go:noescape
func tanh32AVX512(dst, src *float32, n int, c *tanhConstants)
