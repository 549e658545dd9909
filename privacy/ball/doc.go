// Package ball accounts for noise drawn uniformly from the volume of a
// d-dimensional ball, the perturbation of perturbed gradient descent (PrGD,
// Tholeti, "On the differentially private nature of perturbed gradient
// descent"; docs/accounting.md). Such noise gives (0, δ)-differential privacy
// and nothing else: its support is bounded, so an output outside the overlap
// of the two balls identifies the dataset with certainty, and no ε > 0 lowers
// the δ. The package computes:
//
//   - StepDelta: the δ of one step, the total variation between the uniform
//     distributions on two balls of radius r whose centres are Δ apart,
//     δ = I_{(Δ/(2r))²}(1/2, (d+1)/2) (Tholeti, Eq. 6), evaluated by positive
//     series, a power series and Gauss–Legendre quadrature with proven error
//     bounds, so that it is accurate to a few units in the last place even
//     where δ is tiny and d is large (gonum's RegIncBeta loses ~1e-9 at
//     d = 10⁶), in a few µs at any d.
//   - Amplify: δ/N for picking one of N points per step (Tholeti, §IV.A).
//   - ComposeSum (Tholeti's T·δ', Eq. 7) and ComposeExact (1 − (1 − δ')ᵀ, the
//     optimal composition of (0, δ') mechanisms), and SolveRadius, the smallest
//     radius meeting a target total δ.
//   - Accountant: a privacy.Accountant for DP-SGD with ball noise under the
//     shuffle, random-allocation and Poisson samplers and Tholeti's one
//     uniformly drawn example per step ("uniform"); its doc comment gives the
//     argument for each.
//
// Units: the radius r and the distance Δ must be measured in the same space,
// the one the noise is added in (for DP-SGD, the clipped gradient sum before
// it is divided by the batch size; there Δ = C under zero-out and add/remove
// adjacency, 2C under replace-one). The statements are about the idealised,
// real-valued mechanism; effects of floating-point sampling are not covered.
package ball
