// Package kernels holds the CPU numeric kernels of the DP-SGD step: the matrix
// product, per-example (ghost) gradient norms, clip coefficients, clipped sums
// by one GEMM per dense layer, and Gaussian noise from a counter-based
// generator (Philox4x32-10) whose stream the CUDA backend reproduces.
//
// In the notation of docs/design.md ("One step", steps 3–6), a
// dense layer with input activations A (b×d, row i is aᵢ) and per-example
// errors at its pre-activation E (b×h, row i is eᵢ) has per-example gradient
// gᵢ = aᵢ⊗eᵢ for the weights and eᵢ for the bias, so
//
//	‖gᵢ‖² = (‖aᵢ‖² + 1)·‖eᵢ‖²            (RowSqNorms, GhostAccum)
//	cᵢ    = maskᵢ·min(1, C/‖gᵢ‖)            (ClipCoefs)
//	Σᵢ cᵢ·gᵢ = Aᵀ·diag(c)·E,  1ᵀ·diag(c)·E  (ClippedSum)
//
// and the noise added to the clipped sum is N(0, σ²C²) per coordinate
// (AddGaussian), drawn from the stream described at NoiseKey. The same Philox
// blocks also give Laplace noise (AddLaplace: the mechanism of the age-aware
// scheduling of Lin, Lin, Hsu & Huang) and noise uniform in a d-dimensional
// ball spread over several tensors (AddBall: Tholeti's perturbed gradient
// descent).
//
// The noise runs, on amd64 CPUs with AVX-512 (Gaussian) or AVX2 and FMA, in
// assembly kernels that give bit for bit the same numbers as the pure-Go code
// used elsewhere (and with the build tag noasm or purego), and is split over
// goroutines for long tensors.
//
// All matrices are dense and row-major. Shape mismatches (slices too short,
// negative sizes) are programmer errors and panic, as in gonum; values such as
// NaN or ±Inf in the data never panic and are handled as documented.
package kernels
