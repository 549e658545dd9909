// Package ageaware computes age-dependent differential privacy for data that
// follow a finite Markov chain (Lin, Lin, Hsu & Huang, "Age aware scheduling
// for differentially-private federated learning", cited as Lin et al.; see
// docs/ageaware.md; the notion is Zhang, Wei, Berry & Huang, "Age-dependent
// differential privacy", IEEE Trans. IT 2024, cited as [12] below).
//
// A client whose records follow a stationary chain P with stationary law π
// releases an ε_c-DP function of data collected t steps before the time at
// which privacy is judged. The release then only leaks what the old data say
// about today's: with the reverse chain
//
//	P̂_t(x, y) = π(y)·Pᵗ(y, x)/π(x)
//
// and Δ(t) = max_{x,x'} d_TV(P̂_t(x,·), P̂_t(x',·)), the mechanism is
// ε(t, ε_c)-age-dependent DP with ε(t, ε_c) = ln(1 + Δ(t)(e^{ε_c} − 1))
// (Proposition 1 of Lin et al., [12, Th. 1]). Inverting it gives the adaptive
// noise level of Lin et al.'s eq. 4: ε_c = ln((e^{ε̄} − 1)/Δ(t) + 1) meets a
// target ε̄ with data of age t, and is +Inf (no noise at all) when Δ(t) = 0.
//
// [Chain] validates a transition matrix (square, finite, non-negative, rows
// summing to 1, irreducible) and gives its stationary law, t-step and reverse
// matrices, the exact Δ(t) ([Chain.Delta]), the spectral upper bound of [12,
// Prop. 5] for reversible chains ([Chain.SpectralBound]), and Δ for a chain
// started from a law other than π ([Chain.PosteriorDelta]). [Epsilon],
// [AdaptiveEpsC] and [LaplaceScale] are Proposition 1, eq. 4 and the Laplace
// mechanism's scale η = s/ε_c.
//
// Every error about an input wraps privacy.ErrInvalidArgument and names the
// offending row, entry or argument with its valid range; the spectral bound on
// a chain that is not reversible wraps privacy.ErrOutOfRegime. The package has
// no global mutable state, and numerics are float64.
package ageaware
