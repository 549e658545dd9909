package fastblas

import (
	"errors"
	"fmt"
	"strings"

	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"
	"gorgonia.org/gorgonia"

	"github.com/dpsgd/dpsgd/internal/avxgemm"
)

// GoDescription describes gonum's BLAS, as Describe does a library.
const GoDescription = "gonum (pure Go)"

// Choice is the BLAS that Select picked.
type Choice struct {
	// Impl computes every product (kernels.Gemm: the clipped sums, the convolutions'
	// per-example gradients); it is gonum's BLAS when it has neither library nor kernels.
	Impl Implementation
	// Graph computes the training graphs' products (Gorgonia). They need each row of a product
	// to be a function of its own row alone (see rowsIndependent): they go to dpsgd's AVX
	// kernels when the CPU has them, else to the library for the precisions whose rows pass
	// that probe, else to gonum's.
	Graph Implementation
	// Note is set when Auto found no usable library nor kernels: one line saying so and why.
	Note string
	// dependent is whether Impl's library failed the row probe in some precision.
	dependent bool
}

// Describe is the choice in one phrase: GoDescription, the library's Describe or the
// kernels', and, when the graphs' products go elsewhere, where (and, when the library's rows
// depend on their position, that).
func (c Choice) Describe() string {
	if c.Impl == (Implementation{}) && c.Graph == (Implementation{}) {
		return GoDescription
	}
	s := backend(c.Impl, true)
	if c.Impl.lib != nil {
		s = c.Impl.lib.Describe()
	}
	g32, g64 := backend(c.Graph, true), backend(c.Graph, false)
	why := ""
	if c.dependent && c.Impl.lib != nil {
		why = fmt.Sprintf(" (%s's rows depend on their position)", c.Impl.lib.name)
	}
	switch {
	case g32 == s && g64 == s:
		return s
	case g32 == g64:
		return s + "; graph products on " + g32 + why
	case g32 == s:
		return s + "; float64 graph products on " + g64 + why
	case g64 == s:
		return s + "; float32 graph products on " + g32 + why
	}
	return s + "; float32 graph products on " + g32 + ", float64 on " + g64 + why
}

// backend names what computes im's products of one precision (float32 when f32).
func backend(im Implementation, f32 bool) string {
	switch {
	case im.lib != nil && (f32 && im.s32 || !f32 && im.d64):
		return im.lib.Describe()
	case im.asm != nil:
		return fmt.Sprintf("%s, %s", AsmDescription(im.asm), threadsText(im.asm.Threads()))
	}
	return "gonum"
}

// AsmDescription describes dpsgd's kernels, as Describe does a library: "asm (dpsgd's
// AVX-512 GEMM)" or "asm (dpsgd's AVX2 GEMM)".
func AsmDescription(kern *avxgemm.Impl) string {
	return fmt.Sprintf("asm (dpsgd's %s GEMM)", kern.ISA())
}

// Select loads the BLAS that n names and sets its thread count (see ThreadsFor). Go is
// gonum's; Asm is dpsgd's kernels, AVX-512 or AVX2 (an error wrapping ErrNotInstalled on a
// CPU with neither); a library that cannot be loaded is an error (wrapping ErrNotInstalled when it is
// absent), and one that loads computes the sums, with the graphs' products on the kernels
// when the CPU has them (choose). Auto takes the kernels for everything when the CPU has them:
// they were faster than every library in the measurements of docs/benchmarks.md, and their
// results are the same bits on every such CPU and at any thread count. Without them, it loads
// every library of Libraries that is installed and takes the first whose rows are
// position-independent, else the first (choose); with none, gonum's, with a Note: that nothing
// faster is there (and which package to install), or why the libraries found cannot be used.
func Select(n Name, threads int) (Choice, error) {
	return selectWith(n, threads, Open, newAsm)
}

// newAsm returns dpsgd's kernels (AVX-512, else AVX2) running large products on threads
// goroutines, or nil when the CPU has neither.
func newAsm(threads int) *avxgemm.Impl {
	if !avxgemm.Available() {
		return nil
	}
	return avxgemm.New(threads)
}

// selectWith is Select loading libraries with open and the kernels with asm.
func selectWith(n Name, threads int, open func(Name) (*Library, error), asm func(int) *avxgemm.Impl) (Choice, error) {
	if n == Go {
		return Choice{}, nil
	}
	kern, asmWhy := asm(threads), avxgemm.Missing()
	if kern == nil && asmWhy == "" {
		asmWhy = "the AVX kernels are unavailable"
	}
	if kern != nil {
		// The kernels' rows are independent by construction; the probe checks it anyway.
		if s, d := rowsIndependent(Implementation{asm: kern}); !s || !d {
			kern, asmWhy = nil, "their rows failed the position probe"
		}
	}
	switch n {
	case Asm:
		if kern == nil {
			return Choice{}, fmt.Errorf("%s: %w: %s", Asm, ErrNotInstalled, asmWhy)
		}
		im := Implementation{asm: kern}
		return Choice{Impl: im, Graph: im}, nil
	case OpenBLAS, BLIS, MKL:
		lib, err := open(n)
		if err != nil {
			return Choice{}, err
		}
		return choose([]*Library{lib}, threads, kern), nil
	case Auto:
	default:
		return Choice{}, fmt.Errorf("fastblas: BLAS %q: want %s", n, NamesText())
	}
	if kern != nil {
		im := Implementation{asm: kern}
		return Choice{Impl: im, Graph: im}, nil
	}
	var (
		libs   []*Library
		broken []string
	)
	for _, l := range Libraries() {
		lib, err := open(l)
		switch {
		case err == nil:
			libs = append(libs, lib)
		case !errors.Is(err, ErrNotInstalled):
			broken = append(broken, err.Error())
		}
	}
	if len(libs) > 0 {
		return choose(libs, threads, nil), nil
	}
	if len(broken) > 0 {
		return Choice{Note: fmt.Sprintf("BLAS: %s, as dpsgd's kernels cannot run (%s) and no library found is usable (%s)", GoDescription, asmWhy, strings.Join(broken, "; "))}, nil
	}
	return Choice{Note: fmt.Sprintf("BLAS: %s (dpsgd's AVX kernels cannot run: %s); install %s for a faster CPU path (docs/benchmarks.md)", GoDescription, asmWhy, Package(BLIS))}, nil
}

// choose sets the libraries' threads and takes the first library whose float32 and float64
// rows are both position-independent, for everything; failing that, libs[0] for the sums and
// for the graphs' products of the precisions whose rows are, gonum's for the others. (Sums on
// one library and graphs on another were measured too, and were not faster:
// docs/benchmarks.md.) With dpsgd's kernels (kern non-nil), the graphs' products go to
// them instead, in both precisions: they are row-independent and faster than the libraries
// that pass the probe (docs/benchmarks.md).
func choose(libs []*Library, threads int, kern *avxgemm.Impl) Choice {
	var first Choice
	for i, l := range libs {
		l.SetThreads(threads)
		im := l.Implementation()
		c := Choice{Impl: im, Graph: im}
		c.Graph.s32, c.Graph.d64 = rowsIndependent(im)
		c.dependent = !c.Graph.s32 || !c.Graph.d64
		if kern != nil {
			c.Graph = Implementation{asm: kern}
		}
		if !c.dependent {
			return c
		}
		if i == 0 {
			first = c
		}
	}
	return first
}

// Install makes c.Impl the BLAS of gonum's blas32 and blas64 packages (kernels.Gemm) and
// c.Graph that of Gorgonia (gorgonia.Use, which also sets gorgonia.org/tensor's); the zero
// Choice restores gonum's own. It sets process-wide variables that nothing guards: call it
// before any computation starts, never while one runs.
func Install(c Choice) {
	if c.Impl.lib == nil && c.Impl.asm == nil {
		var g gonum.Implementation
		blas32.Use(g)
		blas64.Use(g)
		gorgonia.Use(g)
		return
	}
	blas32.Use(c.Impl)
	blas64.Use(c.Impl)
	gorgonia.Use(c.Graph)
}

// ThreadsFor is the library thread count for a run of `replicas` graph replicas on `cores`
// CPU cores: ⌊cores / replicas⌋, at least 1, so that library threads × replicas ≤ cores
// (every replica calls the library on its own goroutine, each call on that many threads).
func ThreadsFor(cores, replicas int) int {
	return max(1, cores/max(1, replicas))
}

// threadsText is "1 thread" or "n threads".
func threadsText(t int) string {
	if t == 1 {
		return "1 thread"
	}
	return fmt.Sprintf("%d threads", t)
}
