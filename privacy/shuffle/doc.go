// Package shuffle reports the privacy of DP-SGD with fixed-size shuffling
// (a permutation per epoch, cut into M batches) from below: the lower bound
// of Chua, Ghazi, Kamath, Kumar, Manurangsi, Sinha & Zhang ("How Private are
// DP-SGD Implementations?", ICML 2024; "Scalable DP-SGD: Shuffling vs.
// Poisson Subsampling", NeurIPS 2024).
//
// The certified (upper) bound for shuffling is the amplification-free one,
// privacy.NewGaussianEpochs(σ, M, privacy.SamplerShuffle): each epoch one
// Gaussian mechanism. No proven bound with amplification by shuffling
// exists for this sampler, and the lower bound here shows how much any such
// bound could at most gain: the true ε of a shuffled run lies between the
// LowerBound's number and the certified one. A LowerBound is a
// privacy.Accountant that declares privacy.LowerBound, so Budget.Check
// refuses it: it is reported as "at least", never as a guarantee.
package shuffle
