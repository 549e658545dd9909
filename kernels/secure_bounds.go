package kernels

// Bounds that an accountant needs to turn a guarantee of the ideal Gaussian mechanism into one
// for AddSecureGaussian's output (its doc comment, "Privacy of what is released", (3)): per
// coordinate, the sampler's pmf is within a factor e^{±SecureLogRatioBound} of the ideal
// discrete Gaussian for |m/s| ≤ 40, and the ideal and the sampler each put mass below
// exp(SecureLogTailMass) beyond it. privacy.NearIdeal composes them over coordinates and steps.
const (
	// SecureLogRatioBound bounds η = 2^−50·(t²/2 + G·ln 2 + 1) over |t| ≤ 40 and the proposal
	// blocks G ≤ 90: 2^−50·(800 + 62.4 + 1) < 7.7·10⁻¹³, rounded up.
	SecureLogRatioBound = 1e-12
	// SecureLogTailMass is ln(3·10⁻³⁴⁸), the natural log of the per-coordinate mass split off
	// beyond |t| = 40 (kept as a log: 10⁻³⁴⁸ is below the smallest float64).
	SecureLogTailMass = 1.0986122886681098 - 348*2.302585092994046
)
