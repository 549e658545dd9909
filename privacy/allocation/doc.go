// Package allocation accounts DP-SGD under random allocation (balls in bins):
// each epoch every record is assigned to one of M rounds uniformly and
// independently, batches are padded with ghosts to a public size, and the sum
// is divided by the public expected batch size. Under zero-out adjacency one
// epoch is then dominated by the Gaussian pair
//
//	P_M = N(0, I_M),   Q_M = (1/M) Σ_j N(e_j/σ, I_M)
//
// (Chua et al. 2025, "Balls-and-bins sampling for DP-SGD", Thm 3.1; Ertan &
// van Dijk 2026, "Closed-form noise calibration against membership inference
// for random-allocation DP-SGD", eq. 6), and E epochs by its E-fold product.
// The package gives, for that pair: the Berry–Esseen bound of van Dijk &
// Ertan, "Trade-off functions for DP-SGD with subsampling based on random
// shuffling: tight upper and lower bounds" (arXiv 2605.06259, Theorem 4.1, as
// reconstructed here; a loose comparison only, valid for σ ≥ √(3/ln M),
// M ≥ 3), the certified chi-square closed form (Ertan & van Dijk 2026,
// Prop. 3.1), the exact total variation and hockey-stick divergence, the
// Rényi divergence (the partition formula behind Feldman & Shenfeld's
// allocation_rdp_remove), and the asymptotic μ-GDP of van Dijk & Ertan's
// Theorem 5.2 (display only). These bounds are proven for random allocation,
// not for fixed-size shuffling (docs/accounting.md); the shuffle package
// accounts for that sampler.
package allocation
