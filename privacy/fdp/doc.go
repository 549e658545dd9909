// Package fdp is the f-DP layer of the privacy accountants: trade-off curves
// β = f(α) (Dong, Roth & Su 2019, "Gaussian Differential Privacy"; DRS
// below), their conversion to and from (ε, δ)
// privacy profiles, and the membership-inference bound they imply.
//
// A trade-off curve is a plain function, Curve (func(alpha float64) float64):
// for a test of "record in" against "record out" with type-I error α, no test
// has type-II error below f(α). Curves returned here are trade-off functions
// in the sense of DRS Prop. 2.2 (convex, continuous, non-increasing, with
// f(α) ≤ 1 − α) and symmetric (f = f⁻¹), so one curve states (ε, δ)-DP in
// both directions of the neighbouring relation. A curve is a lower bound on
// the true trade-off function: higher is more private.
//
//   - Gaussian(μ): G_μ, the curve of μ-GDP (DRS Eq. 2.4).
//   - EpsDelta(ε, δ): f_{ε,δ}, the curve equivalent to (ε, δ)-DP (DRS Prop. 2.5).
//   - FromProfile / FromAccountant: the curve implied by a whole privacy
//     profile ε ↦ δ(ε) (DRS Prop. 2.12), on a finite ε grid (a lower bound).
//   - ToDelta, TV, MIAAccuracy: back from a curve to δ(ε), to the total
//     variation δ(0), and to the best membership-inference accuracy at equal
//     priors, ½(1 + TV). These round up (pessimistically).
//   - Points: samples of a curve for plotting.
//
// Bad input (NaN, Inf, out-of-range parameters, a nil function) is an error
// wrapping privacy.ErrInvalidArgument that names the field and its range.
// A Curve itself cannot fail: it clamps α into [0, 1] and maps a NaN α to 0,
// the weakest (always valid) lower bound.
package fdp
