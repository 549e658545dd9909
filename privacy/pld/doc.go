// Package pld computes privacy-loss distributions (PLDs) and the Poisson
// PLD accountant of DP-SGD.
//
// A PMF is the distribution of the privacy loss L = ln(dP/dQ)(X), X ~ P, of
// a pair of output distributions (P, Q), discretized on the uniform grid
// {iΔ} plus a mass at +∞ (Koskela, Jälkö & Honkela 2020; Meiser & Mohammadi
// 2018; Google dp_accounting's PLDAccountant, whose design this package
// follows). The hockey-stick divergence of the pair is
//
//	δ(ε) = E_P[(1 − e^{ε−L})₊] = Σ_ℓ p(ℓ)(1 − e^{ε−ℓ})₊ + p(∞),
//
// composition of independent mechanisms adds privacy losses (their PMFs
// convolve), and n-fold self-composition is one FFT, an n-th power and one
// inverse FFT (gonum dsp/fourier).
//
// A PMF is either pessimistic (its δ(ε) is never below the true one: losses
// rounded up, truncated mass moved to +∞, every numerical error bound added)
// or optimistic (its δ(ε) is never above the true one: losses rounded down,
// errors subtracted; used for lower bounds such as privacy/shuffle).
//
// PoissonGaussian builds the PMF of one step of the Poisson-subsampled
// Gaussian mechanism by the connect-the-dots
// discretization of Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022
// ("Connect the Dots: Tighter Discrete Approximations of Privacy Loss
// Distributions", PETS 2022), in the remove or the add direction, and
// PoissonAccountant composes it over the steps of a run: a privacy.Accountant
// under add/remove-one adjacency whose ε is never below the true one and is
// typically 5–10% below the RDP value.
package pld
