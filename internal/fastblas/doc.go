// Package fastblas is the fast CPU BLAS: it serves gonum's blas.Float32 and blas.Float64
// interfaces with dpsgd's own GEMM (package avxgemm, the "asm" choice: AVX-512 kernels, or AVX2
// ones on CPUs without AVX-512, the same bits either way; Auto takes it on every CPU that has
// either), or with OpenBLAS, BLIS or Intel MKL loaded at run time
// through purego (so the binary still builds with CGO_ENABLED=0, as for the CUDA driver in
// docs/gpu.md).
//
// Only the Level-3 products Sgemm and Dgemm go to the library: they are the whole of the BLAS
// time of a DP-SGD step (the forward and backward products of the Gorgonia graphs, and the
// clipped sums Aᵀ·diag(c)·E of kernels.ClippedSumWide; docs/benchmarks.md has the profile).
// Every other routine is gonum's pure-Go one, through the embedded gonum.Implementation.
//
// Arguments are checked by gonum's rules before a library is called; a call that gonum would
// refuse, or that gonum answers without computing (an empty C, α = 0 or k = 0), is handed to
// gonum itself, so bad shapes panic with gonum's messages and the edge cases behave as gonum's.
// One difference remains: gonum skips the terms whose element of A is zero, so 0·Inf and 0·NaN
// in B add nothing there, while the libraries compute them (NaN). The engine never relies on
// either: the clipped sums leave out non-finite rows before their GEMM (kernels.ClippedSum).
//
// The training graphs' products need more than accuracy: each row of a product must come out
// the same, bit for bit, wherever it sits in the batch, so that one record cannot move another
// record's activations, errors or clip coefficient (engine/nn's xentOp documentation). A probe
// checks that when a library loads (rowsIndependent); a library that fails it (OpenBLAS 0.3.21)
// computes only kernels.Gemm's products (the clipped sums, whose rounding bound holds in any
// order of summation, and the convolutions' per-example gradients, one call per example), and
// the graphs go to dpsgd's GEMM, or keep gonum's on a CPU without it. Without dpsgd's GEMM,
// Auto prefers a library that passes (BLIS). dpsgd's GEMM has the property by
// construction; the probe checks it too before it is used.
//
// Install makes a Choice the BLAS of gonum's blas32 and blas64 packages (kernels.Gemm) and of
// Gorgonia (gorgonia.Use, which also sets gorgonia.org/tensor's); it is process-wide, as the
// libraries' thread pools are, and is meant to be called before any computation starts. The
// command chooses with --blas or DPSGD_BLAS (Select); the library's threads are pinned so that
// library threads × graph replicas ≤ CPU cores (ThreadsFor).
package fastblas
