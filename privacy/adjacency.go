package privacy

// WithPublicSize restates a Poisson accountant's guarantee for zero-out adjacency.
//
// A run that derives its sampling rate or its divisor from the dataset size N (q = B/N for an
// expected batch B) releases N with them, so neighbouring datasets cannot differ in size: the
// relation the run really has is zero-out (one record replaced by a ghost whose clipped
// gradient is zero, N public). For Poisson sampling (plain or truncated) the add/remove
// bounds hold unchanged under zero-out: a step's output is the mixture
// (1 − q)·N(0, σ²) + q·N(Δ, σ²) against N(0, σ²) in both relations, with the same q and the
// same divisor on both sides (Kairouz, McMahan, Song, Thakkar, Thakurta & Xu 2021,
// "Practical and Private (Deep) Learning without Sampling or Shuffling", ICML; the truncation
// coupling of TruncatedPoisson does not use the size difference). So the numbers stay and
// only the label changes. An accountant that is already zero-out is returned as it is.
func WithPublicSize(acc Accountant) Accountant {
	if acc == nil || acc.Adjacency() == AdjacencyZeroOut {
		return acc
	}
	return publicSize{acc}
}

// publicSize is an accountant whose guarantee is stated for zero-out adjacency.
type publicSize struct{ Accountant }

func (publicSize) Adjacency() string { return AdjacencyZeroOut }

// Approximate passes on the wrapped accountant's declaration, so that a wrapped
// approximation is still refused as a guarantee.
func (p publicSize) Approximate() bool { return IsApproximate(p.Accountant) }
