// Package audit measures, from below, how distinguishable DP-SGD's released outputs are:
// it trains many times with a canary example and many times without it, with the real engine
// step (engine.Learner: per-example clipping, the counter-based Gaussian noise, the expected
// batch size divisor, SGD), the real samplers (engine/sampler) and the real noise, runs the
// likelihood-ratio test of the two worlds on the released parameters, and turns the test's
// false-positive and false-negative rates into an empirical lower bound on ε at δ with
// Clopper–Pearson confidence intervals (Jagielski, Ullman & Oprea 2020, "Auditing
// Differentially Private Machine Learning"; Nasr et al. 2021, 2023). The bound is reported
// next to the ε that the sampler's accountant claims for the same σ, sampler, steps and δ:
// a lower confidence bound above the claim is a bug in the engine or the accountant.
//
// # The canary and the two worlds
//
// The model is a two-class logistic regression over D features. Feature D−1, the canary
// feature, is zero in every ordinary example; the canary is a·e_{D−1} with label 0. Its
// gradient in the two canary coordinates W[D−1,0], W[D−1,1] is a·(−p₁, p₁), so its clipped
// contribution there always points along (−1, 1)/√2 with norm ρC, ρ = a/√(a²+1), whenever it
// is clipped (a = 100 and a tiny learning rate keep it clipped; StepStats.Clipped checks it).
// No other example touches those coordinates, so in the world without the canary they hold
// pure noise. The world without the canary keeps the canary's index in the sampler and
// drops it from every batch the sampler draws: a ghost with zero gradient, which is exactly
// the zero-out neighbour (shuffle, allocation; privacy-math.md §2) and, for the released
// canary coordinates, the same law as removing the canary (Poisson, add/remove, with the
// dataset size and hence the divisor public).
//
// For shuffle the opposed canary (CanaryOpposed) also puts every ordinary example at
// a·e_{D−1} with label 1, so each pushes the canary coordinates by −ρC: this is the linear
// instance of Chua et al.'s shuffle lower bound (privacy-math.md §8d; others at −1, the
// target at +1, its ghost at 0), which makes the position of the differing example's batch
// visible in both worlds.
//
// # The test
//
// Per step t the auditor reads y_t = ⟨θ_{t+1} − θ_t, (1, −1)/√2⟩·B/(η σ C), the canary
// coordinates' update in units of the noise (B the public divisor, η the learning rate),
// which is N(0, 1) plus s = ρ/σ per canary in the batch (and −s per opposed example).
// With ThreatIterates (every iterate released, the adversary all DP-SGD accountants bound)
// the score is the log-likelihood ratio of the two worlds:
//
//	allocation, shuffle (isolated):  Σ_epochs ln (1/M) Σ_t exp(s y_t − s²/2)
//	poisson (and truncated):         Σ_t ln(1 − q + q·exp(s y_t − s²/2))
//	shuffle (opposed):               Σ_epochs ln Σ_t exp(2s y'_t − 2s²) − ln Σ_t exp(s y'_t − s²/2),
//	                                 y'_t = y_t + B·s
//
// and by the Neyman–Pearson lemma the threshold tests on it are the most powerful tests at
// every level. With ThreatFinal (only the final model released) the score is
// Z = Σ_t y_t, read from the final parameters: N(0, T) without the canary and N(K s, T) with
// it, K the canary's number of inclusions (E for shuffle and allocation, Binomial(T, q) for
// Poisson); a Gaussian shift, or a mixture of non-negative shifts, has a likelihood ratio
// increasing in Z (Karlin–Rubin), so thresholds on Z are again the most powerful tests.
//
// # From a test to ε
//
// Half of each world's runs choose the threshold; the other half measure it, so the choice
// costs nothing in confidence. With FPR and FNR of the test "score > τ ⇒ canary", any
// (ε, δ)-DP mechanism satisfies ε ≥ ln((1 − δ − FPR)/FNR) and ε ≥ ln((1 − δ − FNR)/FPR)
// (Kairouz, Oh & Viswanath 2015). EmpiricalEpsilon evaluates these at Clopper–Pearson bounds
// of the two rates; the lower end is a lower bound on the true ε at the stated confidence.
package audit
