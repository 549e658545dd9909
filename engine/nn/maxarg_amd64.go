//go:build !noasm && !purego

package nn

import "golang.org/x/sys/cpu"

// maxArgAVX512 is whether maxArg32 runs maxArg32AVX512 (the CPU and the OS support AVX-512F).
var maxArgAVX512 = cpu.X86.HasAVX512F

// maxArg32AVX512 is maxArg32 on n ≥ 0 elements, 16 per instruction (maxarg_amd64.s): the
// compare is ordered greater-than (false when either value is NaN, as Go's >), and the stores
// are masked to the lanes where it holds, so every element ends as maxArg32's loop leaves it.
//
//go:noescape
func maxArg32AVX512(o *float32, a *int32, src *float32, n int, at int32)
