// Package personalized calibrates per-client Gaussian noise for federated
// DP training in which every client asks for its own budget (εᵢ, δᵢ) and is
// drawn at its own rate qᵢ (docs/accounting.md, "Personalized σ").
//
// The source is an online appendix ("Online Appendix: proof sketch of
// theorems and lemmas") to a paper on federated learning with personalized
// privacy budgets and client sampling. The appendix names neither the
// paper's title nor its authors, so this code cites it as the personalized-DP
// FL appendix, by its own lemma, theorem and equation numbers.
//
// A run makes T = K·R draws; client i is chosen Cᵢ ~ Binomial(T, qᵢ) times.
// SelectionBound gives Lemma 1's bound Rᵢ on Cᵢ, exceeded with probability at
// most δ‴: the appendix's logistic approximation and the exact binomial
// quantile, of which the larger is used (the approximation can undershoot).
// Calibrate turns (εᵢ, δ'ᵢ, Rᵢ) into noise two ways: the appendix's explicit
// classic-Gaussian calibration, and the tight one by exact composition of
// Gaussian mechanisms in μ-GDP (the default: valid at every ε and usually
// much smaller). Spent reports what a client has spent after c selections,
// for the per-round check of a run, which must retire a client once Cᵢ
// reaches Rᵢ. UtilityCost is the noise term of the appendix's convergence bound
// (eq. 11), and OrderOfMagnitude evaluates the appendix's Ω(·) statements with
// constant 1, for comparison only.
//
// Errors for input out of range wrap privacy.ErrInvalidArgument and name
// the field and its range.
package personalized
