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
// the zero-out neighbour (shuffle, allocation; docs/accounting.md) and, for the released
// canary coordinates, the same law as removing the canary (Poisson, add/remove, with the
// dataset size and hence the divisor public).
//
// The trainings' samplers and the claim the audit checks come from the front door, package
// dpsgd, as `dpsgd train` builds them (dpsgd.Plan.NewSampler with the sampler's default
// guarantee accountant): the claim is stated for zero-out adjacency with N public for every
// sampler, the neighbour the ghost world is; for Poisson its numbers are those of add/remove
// (Kairouz et al. 2021, "Practical and Private (Deep) Learning without Sampling or
// Shuffling"). σ calibrated to a target ε (SolveSigma) is the front door's calibration over
// the audit's own step count, which may end inside an epoch.
//
// For shuffle the opposed canary (CanaryOpposed) also puts every ordinary example at
// a·e_{D−1} with label 1, so each pushes the canary coordinates by −ρC: this is the linear
// instance of Chua et al.'s shuffle lower bound (Chua et al. 2024; others at −1, the
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
// # Adversarial canaries
//
// The designs above bound what a benign record reveals. DP-SGD's guarantee rests on a
// stronger fact: one record moves the clipped sum by at most C whatever it holds and
// wherever it sits in the physical batches (Abadi et al. 2016, "Deep Learning with
// Differential Privacy"). The adversarial canaries (CanaryNaN, CanaryInf, CanaryHugeLogit)
// test that fact from outside: the canary is v·e_{D−1} with label 1 and v = NaN, −Inf or
// −3.4028235e38 (the largest float32), and, as in the opposed design, every ordinary example
// is a·e_{D−1} with label 1, so each pushes y by −s. The ordinary examples drive W[D−1, 0]
// below 0 from the first step, so v < 0 gives the canary a class-0 logit of +Inf or about
// 1e34 (at θ₀ = 0 the −Inf canary's logits are NaN and the huge one's 0; the NaN canary's
// are always NaN): the value that a softmax which takes a row's maximum from another row
// (gorgonia's LogSoftMax seeds every row's running maximum with element 0 of the whole
// matrix) spreads to every other row of the canary's physical batch, whose errors become
// NaN or ±Inf, whose clip coefficients become 0, and whose pushes vanish. The cross-row fault is thus a missing shift: y_t shows the ordinary
// examples that survive. With a correct engine the NaN and Inf canaries' own gradient norms
// are not finite, so their clip coefficient is 0 and the two worlds have the same law (the
// empirical ε is near 0); the huge-logit canary's features are finite and its gradient is
// clipped to C along (1, −1)/√2, so it adds c = ρ_c/σ = 1/σ per inclusion, a benign
// canary's push (its class-0 probability is exactly 1 once W[D−1, 0] < 0, so its error is
// (1, −1)). Result.Collateral counts the examples other than the canary that the engine
// zeroed as non-finite, which a correct engine never does: a direct, white-box reading of
// the same fault. Config.Float32 runs the engine in float32, `dpsgd train`'s default, where
// the fault needs a logit only about 104 above the others (745 in float64).
//
// Where the canary sits is CanaryRow. Poisson and allocation batches come in increasing
// index order and the engine cuts them into physical batches of Batch rows in that order,
// so RowFirst (index 0) puts the canary in row 0 of the step's first physical batch
// whenever it is drawn, the one position from which the fault reaches the others; RowRandom
// draws its index per training. Shuffle batches come in permutation order, so there the
// canary's row is uniform (RowRandom only). The adversarial designs default to N = 64 and
// Batch = N/4 (still q = 1/4 and four steps per epoch): the fault removes up to Batch − 1
// pushes, which must stand out against the spread of the random batch size.
//
// The scores are the likelihood ratios of the ghost world against the canary world under
// the cross-row fault (the canary's own push c, and, when it is row 0 of a physical batch,
// the other rows of that batch removed), so by the Neyman–Pearson lemma they are the most
// powerful tests of a faulty engine; against a correct one they are still valid (any score
// gives a valid bound), only no longer optimal. With kb the ordinary examples drawn below
// the canary and ka above, the fault removes E = min(B_phys − 1, ka) of them when kb is a
// multiple of the physical batch size B_phys, and none otherwise:
//
//	poisson (and truncated):  Σ_t ln(1 − q + q·Σ_v P₁(v) φ(y_t + s v − c) / Σ_v P₀(v) φ(y_t + s v)),
//	                          P₀ = Binomial(N − 1, q), P₁ the law of kb + ka − E with
//	                          kb ~ Binomial(j, q), ka ~ Binomial(N − 1 − j, q), j the index;
//	shuffle:                  Σ_epochs ln A₁ − ln A₀ with y' = y + B·s,
//	                          A₀ = r + (B/N) Σ_t e^{s y'_t − s²/2},
//	                          A₁ = r + (B/N) Σ_t [(1 − 1/B) e^{u y'_t − u²/2} + (1/B) e^{w y'_t − w²/2}],
//	                          u = s + c, w = B·s + c, r = (N − M·B)/N (the dropped remainder);
//	allocation:               Σ_epochs ln((1/M) Σ_R [x^{N−1}] H'_R Π_{t≠R} H_t) − ln [x^{N−1}] Π_t H_t,
//	                          H_t(x) = Σ_k φ(y_t + s k) x^k/k! (the multinomial round counts),
//	                          H'_R(x) = Σ_k x^k/k! Σ_kb P(kb | k) φ(y_R + s(k − E) − c),
//	                          P(kb | k) hypergeometric,
//
// the truncation of the truncated Poisson sampler (rare at its default maximum) being
// ignored. Unobserved steps of a partial epoch carry no information, as above. With
// ThreatFinal the score is Z = Σ_t y_t, larger with the fault. The scores are checked
// against brute-force enumeration of every batch on tiny datasets, and their power on the
// real engine step with the fault emulated (the canary's physical batch stripped of its
// other rows): the empirical bound then exceeds the accountant's claim.
//
// # From a test to ε
//
// Half of each world's runs choose the threshold; the other half measure it, so the choice
// costs nothing in confidence. With FPR and FNR of the test "score > τ ⇒ canary", any
// (ε, δ)-DP mechanism satisfies ε ≥ ln((1 − δ − FPR)/FNR) and ε ≥ ln((1 − δ − FNR)/FPR)
// (Kairouz, Oh & Viswanath 2015). EmpiricalEpsilon evaluates these at Clopper–Pearson bounds
// of the two rates; the lower end is a lower bound on the true ε at the stated confidence.
package audit
