// Package ageaware simulates the age-aware scheduling for differentially
// private federated learning of Lin, Lin, Hsu & Huang, "Age aware scheduling
// for differentially-private federated learning" (cited as Lin et al. below;
// docs/ageaware.md, the privacy calculations in privacy/ageaware).
//
// # The protocol (Section III-B)
//
// m clients hold time-varying data: client i's records follow a finite Markov
// chain Pᵢ whose states carry values (electricity use in Wh in the paper). The
// server schedules each client's collection time t_{c,i} ∈ {0, …, t_agg}; the
// client collects |Dᵢ| records, trains locally by ERM with the squared loss
// (its estimate Wᵢ is the mean value), adds Laplace noise of scale
// ηᵢ = sᵢ/ε_{c,i} (sᵢ = (max v − min v)/|Dᵢ|, the ℓ1-sensitivity of a mean
// when one record is replaced), and uploads. At t_agg the server aggregates
// W̃ = Σ pᵢ·Uᵢ with pᵢ = |Dᵢ|/|D|. The ideal model W^{agg} is the same
// records' mean at t_agg, without noise. Because the empirical loss is
// quadratic with minimizer W^{agg}, the loss difference (2a) is exactly
//
//	L̂(W̃, D^{agg}) − L̂(W^{agg}, D^{agg}) = (W̃ − W^{agg})².
//
// Reading of the paper's model (a choice: the text can be read two ways). The
// seed sets "the initial probability distributions μᵢ^{(t_{c,i})}" and says
// clients "are only active with their initial states at time t_{c,i}": a
// record's state at its collection time has the law Initᵢ = μᵢ, and its state
// at t_agg follows aᵢ = t_agg − t_{c,i} steps of the chain. The collected
// data's law therefore does not depend on the schedule; the fresh data's law
// μᵢPᵢ^{aᵢ} does. Older data are biased against today's and carry less
// information about them, so less noise is needed: that is the trade-off.
//
// Projection. Each client projects its noisy estimate on its hypothesis class
// [min v, max v] (Uᵢ = clip(Wᵢ + Nᵢ), post-processing, no privacy cost). The
// seed does not mention it, but Theorem 1 needs it: with unbounded Laplace
// noise the cumulant generating function of the squared loss is infinite for
// every λ > 0, so no finite ψ satisfies the theorem's assumption. Simulation,
// exact loss and bound all use the projected model.
//
// # Noise (Proposition 1, eq. 4)
//
// Client i's release is ε(aᵢ, ε_{c,i})-age-dependent DP with
// ε(a, ε_c) = ln(1 + Δᵢ(a)(e^{ε_c} − 1)). Adaptive noise (NoiseAdaptive) takes
// eq. 4's ε_{c,i} for each client, so every release is exactly ε̄-private.
// Constant noise (NoiseConstant) follows the paper's Section IV: one ε_c for all
// clients "regardless of t_{c,i}", with ε̄ = maxᵢ ε(aᵢ, ε_c); for a target ε̄
// that is the smallest of the clients' eq. 4 levels. (When any client is
// fresh, Δ = 1 and this is ε_c = ε̄, classical DP; it is never less private.)
//
// Δᵢ(a) comes from Config.Delta: the spectral bound (the paper's choice, the
// default), the exact reverse-chain Δ, or the posterior Δ for data started
// from Initᵢ. Caveat: Proposition 1 is stated for a stationary chain, and the
// seed both assumes stationarity and starts its clients from laws μᵢ ≠ πᵢ.
// The mixture argument behind Proposition 1 holds for any law of the old data
// given today's; DeltaPosterior uses the one of the simulated model, whereas
// the spectral and exact sources (as in the paper) use the stationary reverse
// chain.
//
// # Evaluating Theorem 1 (the proposed schedule)
//
// Theorem 1 bounds the expected loss difference by
//
//	Σᵢ pᵢ [ψ*⁻¹ᵢ,₊(I(W; Z_{i,j}^{agg})) + φ*⁻¹ᵢ,₋(I(W^{agg}; Z_{i,j}^{agg}))] + E[R(W̃, W^{agg})]
//
// and leaves ψ, φ and the mutual informations to the user. This package
// evaluates every term exactly or by a valid upper bound, so that the result
// is a true upper bound of the expected loss (the tests check it):
//
//   - The mutual informations are exact, on the lattice of sums of the state
//     values (the values are commensurate in the paper: multiples of 10 Wh).
//     With per-client projection the loss depends on the vector of client
//     estimates, so the aged term uses I(Wᵢ; Z_{i,j}^{agg}) ≥ I(W; Z_{i,j}^{agg})
//     (data processing; the other clients are independent of Z_{i,j}); the fresh
//     term uses I(Wᵢ^{agg}; Z_{i,j}^{agg}) ≥ I(W^{agg}; Z_{i,j}^{agg}) likewise,
//     which makes every term a function of one client's age.
//   - ψ and φ are Bennett's bounds on the cumulant generating function of a
//     centred variable X ≤ b with variance v, (v/b²)(e^{λb} − 1 − λb), with the
//     exact variance of the loss under the product law (the exact law of W̃ is
//     known through its cumulants: exact lattice laws of the Wᵢ and closed-form
//     moments of the projected Laplace noise), b = sup ℓ − E ℓ for ψ and b = E ℓ
//     for φ (the loss is ≥ 0). Their inverses are computed exactly.
//   - E[R] = E[L̄(W̃)] − E[L̄(W^{agg})] is exact in closed form for the
//     squared loss: Var W̃ + (E W̃ − m̄)² − Var W^{agg}.
//
// The exact expected loss (ExpectedLoss) and a Monte Carlo estimate (Sample)
// are computed the same way for comparison. The bound is loose by design: its
// generalization terms are of order σ_ℓ·√(2I) with I ≈ 1/(2|Dᵢ|), whereas the
// true generalization gaps are of order σ²/|D|. Those terms decrease with age,
// since old data say little about today's, so where the noise is small (large
// ε̄) the bound favours stale data more than the true loss does; where the
// noise dominates (small ε̄) it tracks the optimum closely.
//
// # Searching schedules
//
// There are (t_agg + 1)^m schedules. Exhaustive enumerates them. The bound is
// not separable over clients, so per-client minimization is not exact:
// E[R] contains (Σₖ pₖβₖ)², βₖ the bias of client k's projected upload against
// its fresh mean (biases of different signs cancel, and the best schedule uses
// that), and each ψᵢ depends on the law of W̃, hence on every client's noise.
// The same holds for the true loss. CoordinateDescent therefore gives what it
// can guarantee: a coordinatewise minimum (no single client can improve by
// changing its own collection time), reached by a monotone descent from the
// all-fresh and all-oldest schedules in O(sweeps·m·(t_agg + 1)) evaluations;
// on separable objectives it is exact. The tests and benchmarks compare it
// with the exhaustive search.
//
// # Defaults
//
// PaperConfig is Section IV's setting (three clients, the (p, q) pairs, initial
// laws and 100 samples of the paper, the spectral Δ). The paper does not state
// t_agg or the range of ε̄ of its Fig. 3: t_agg = DefaultAggTime = 15 lets the
// slowest chains' spectral bound fall below 1 (it stays 1 up to age 7), and
// dpsgd ageaware simulate sweeps ε̄ from 0.01 to 3, where the schemes separate.
//
// # Monte Carlo
//
// A Sample draws, per trial and client, the records' trajectories
// (datasets.MarkovChain) and one unit Laplace draw (kernels.AddLaplace), and
// is shared by every schedule and noise level (common random numbers). The
// optimal scheme searches on one Sample and every scheme is evaluated on
// another, independent one, so the optimal scheme's reported loss is not
// biased down by its own search. Everything is reproducible from a seed, and
// long runs take a context.Context.
//
// # Role
//
// One of the repository's two research studies (with package federated): a
// simulation built on privacy/ageaware, datasets and kernels, driven by
// `dpsgd ageaware simulate`. It is not part of the DP-SGD engine, and the
// engine never imports it (internal/layering checks the import rules).
package ageaware
