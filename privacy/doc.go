// Package privacy holds the privacy accountants of dpsgd: given the sampler a
// DP-SGD run uses, its noise multiplier σ and the number of steps taken, an
// Accountant reports the (ε, δ) spent, and a Budget says whether a run stays
// within a target. CalibrateSigma finds the smallest σ that meets a target.
//
// Every accountant is proven for one sampler (see docs/accounting.md, "Which
// statement for which sampler"), and says which through Sampler():
//
//   - PoissonRDP ("poisson"): Rényi DP of the Poisson-subsampled Gaussian
//     mechanism (Mironov, Talwar & Zhang 2019), integer
//     and fractional orders, converted to (ε, δ) with the improved conversion
//     of Balle et al. 2020.
//   - TruncatedPoisson ("poisson-truncated"): the same, plus the probability
//     that a batch was cut at the physical batch size.
//   - GaussianEpochs ("shuffle" or "allocation"): amplification-free, each
//     epoch one Gaussian mechanism, exactly μ-GDP with μ = √E/σ
//     (the deterministic-batches case of Chua et al. 2024).
//   - GDPCLT ("poisson"): the central-limit approximation of Bu et al.
//     2019. It is not a bound: it implements Approximation
//     and Budget.Check refuses it.
//
// The subpackages hold the other accountants: pld (Poisson PLD), allocation
// (van Dijk & Ertan's Gaussian pair for random allocation), shuffle (Chua et
// al.'s lower bound), fdp (trade-off curves), ball (Tholeti's uniform-ball
// noise: (0, δ) statements only), personalized (the personalized-DP FL
// appendix: per-client σ for federated training), ageaware (Lin, Lin, Hsu &
// Huang: age-dependent DP of Markov data), and accounting, which maps a
// mechanism, a sampler and a method name to the accountant proven for it and
// keeps the ledger.
//
// Adjacency (Accountant.Adjacency): Poisson accountants use add/remove-one;
// the per-epoch Gaussian accountant uses zero-out (the differing record
// replaced by a ghost with a zero gradient), so that one record moves the
// clipped sum by at most C.
//
// All numerics are float64 and evaluated in log space where quantities can
// under- or overflow. Noise multipliers are in units of the clipping norm C.
package privacy
