// Package allocation accounts DP-SGD under random allocation (balls in bins):
// each epoch every record is assigned to one of M rounds uniformly and
// independently, batches are padded with ghosts to a public size, and the sum
// is divided by the public expected batch size. Under zero-out adjacency one
// epoch is then dominated by the Gaussian pair of seed 002
//
//	P_M = N(0, I_M),   Q_M = (1/M) Σ_j N(e_j/σ, I_M)
//
// (privacy-math.md §2), and E epochs by its E-fold product. The package gives,
// for that pair: seed 002's Berry–Esseen bound (Theorem 4.1, privacy-math §4,
// a loose comparison only, valid for σ ≥ √(3/ln M), M ≥ 3), the certified
// chi-square closed form (§6.1), the exact total variation and hockey-stick
// divergence (§6.2), the Rényi divergence (§6.3), and the asymptotic μ-GDP of
// Theorem 5.2 (§5, display only). These bounds are proven for random
// allocation, not for fixed-size shuffling (§2, §10); the shuffle package
// accounts for that sampler.
package allocation
