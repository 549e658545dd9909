package nn

// The normalization layers' rule (Norm), materialized: with y = γ⊙x̂ + β and e = ∂L/∂y, example
// i's gradient is ∂ℓᵢ/∂γ = Σₚ eₚ⊙x̂ₚ and ∂ℓᵢ/∂β = Σₚ eₚ over its P rows: 2·C values, small
// whatever the batch, so materializing them is the cheapest exact rule.
func normRule(p, c int) MatGradFunc {
	return func(dst []float64, i int, taps [][]float64, e []float64) {
		clear(dst)
		xh := taps[0]
		g, bt := dst[:c], dst[c:2*c]
		for r := i * p; r < (i+1)*p; r++ {
			er, xr := e[r*c:(r+1)*c], xh[r*c:(r+1)*c]
			for j, v := range er {
				g[j] += v * xr[j]
				bt[j] += v
			}
		}
	}
}
