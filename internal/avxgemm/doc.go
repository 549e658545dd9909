// Package avxgemm is dpsgd's own matrix product C = α·op(A)·op(B) + β·C for row-major float32
// and float64 matrices, in AVX-512 or AVX2 assembly: the fast CPU path of the training graphs when no
// system BLAS computes them correctly for DP-SGD.
//
// What it guarantees beyond accuracy is that every row of C is a function of that row of
// op(A), op(B), α, β and that row of C alone, bit for bit: not of the row's position in the
// batch, of the number of rows, of the threads, nor of the other rows' values. A DP-SGD step
// needs this (internal/fastblas's rowsIndependent, engine/nn's per-example graphs): with it,
// one record can move neither another record's activations nor its clip coefficient, even by
// a rounding. Debian's OpenBLAS does not have it on the CPUs measured (docs/benchmarks.md),
// which left the graphs on gonum's pure-Go products at a tenth of the machine's speed.
//
// It holds by construction. Every element of C is accumulated in one vector lane from +0 by
// one fused multiply-add per k, k ascending, in blocks of a fixed KC values of k that depend
// on k alone; a block's sum s updates C as α·s (the first block when β = 0, C unread), α·s +
// β·C (the first block otherwise) or α·s + C (the later blocks), each rounding once per
// operation. The micro-kernels (gemm_amd64.s, written by asmgen) compute 16 rows at a time
// with AVX-512, 6 with AVX2: the full blocks of rows in place, the last, partial block from a
// zero-padded copy, with the same operations in the same order. Rows never share an
// accumulator, and threads split the rows in whole blocks. The AVX-512 and the AVX2 kernels
// therefore give the same bits too, so a run's result does not depend on which the CPU has.
//
// The package runs on amd64 CPUs with AVX-512F, or with AVX2, FMA and POPCNT (Available; New
// takes AVX-512 where it can); elsewhere it has no kernels and Available reports false. internal/fastblas serves it as the "asm" BLAS and checks the
// row property again at run time with its probe.
package avxgemm
