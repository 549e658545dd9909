//go:build !amd64 || noasm || purego

package kernels

// The assembly kernels are not built on other architectures or with the
// build tag noasm or purego; the pure-Go path computes the same stream.

// avxParams and avx512Ops are empty where their kernels are not built.
type (
	avxParams struct{}
	avx512Ops struct{}
)

// bestKernel is the pure-Go kernel, the only one built.
const bestKernel = kernelGo

func kernelSupported(k kernel) bool { return k == kernelGo }

// useKernel records k, which is kernelGo here (avx512Ops is empty).
func (g *generator) useKernel(k kernel, _ uint64) {
	g.k, g.avx512Ops = k, avx512Ops{}
}

func fastParams(*philoxStream, uint64) *avxParams { return nil }

func normalsFast(*generator, []float64, uint32) int { return 0 }

func applyFast[T Float](kernel, []T, []float64, float64, bool) int { return 0 }
