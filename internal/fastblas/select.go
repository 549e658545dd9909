package fastblas

import (
	"errors"
	"fmt"
	"strings"

	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"
	"gorgonia.org/gorgonia"
)

// GoDescription describes gonum's BLAS, as Describe does a library.
const GoDescription = "gonum (pure Go)"

// Choice is the BLAS that Select picked.
type Choice struct {
	// Impl computes every product (kernels.Gemm: the clipped sums, the convolutions'
	// per-example gradients); its Library is nil for gonum's BLAS.
	Impl Implementation
	// Graph computes the training graphs' products (Gorgonia). They need each row of a product
	// to be a function of its own row alone (see rowsIndependent): Graph is Impl for the
	// precisions whose rows pass that probe, gonum's for the others.
	Graph Implementation
	// Note is set when Auto found no usable library: one line saying so and why.
	Note string
}

// Describe is the choice in one phrase: GoDescription, or the library's Describe and, when
// the graphs' products stay on gonum, which.
func (c Choice) Describe() string {
	lib := c.Impl.lib
	if lib == nil {
		return GoDescription
	}
	s := lib.Describe()
	why := fmt.Sprintf(" (%s's rows depend on their position)", lib.name)
	switch g := c.Graph; {
	case !g.s32 && !g.d64:
		s += "; graph products on gonum" + why
	case !g.s32:
		s += "; float32 graph products on gonum" + why
	case !g.d64:
		s += "; float64 graph products on gonum" + why
	}
	return s
}

// Select loads the BLAS that n names and sets its thread count (see ThreadsFor). Go is
// gonum's; a library that cannot be loaded is an error (wrapping ErrNotInstalled when it is
// absent); Auto loads every library of Libraries that is installed and takes the first whose
// rows are position-independent, else the first (choose), and with none installed gonum's,
// with a Note: that no library is installed (and which package to install), or why the ones
// found cannot be used.
func Select(n Name, threads int) (Choice, error) {
	return selectWith(n, threads, Open)
}

// selectWith is Select loading libraries with open.
func selectWith(n Name, threads int, open func(Name) (*Library, error)) (Choice, error) {
	switch n {
	case Go:
		return Choice{}, nil
	case OpenBLAS, BLIS, MKL:
		lib, err := open(n)
		if err != nil {
			return Choice{}, err
		}
		return choose([]*Library{lib}, threads), nil
	case Auto:
	default:
		return Choice{}, fmt.Errorf("fastblas: BLAS %q: want %s", n, NamesText())
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
		return choose(libs, threads), nil
	}
	if len(broken) > 0 {
		return Choice{Note: fmt.Sprintf("BLAS: %s, as no library found is usable (%s)", GoDescription, strings.Join(broken, "; "))}, nil
	}
	return Choice{Note: fmt.Sprintf("BLAS: %s; install %s for a faster CPU path (docs/benchmarks.md)", GoDescription, Package(BLIS))}, nil
}

// choose sets the libraries' threads and takes the first library whose float32 and float64
// rows are both position-independent, for everything; failing that, libs[0] for the sums and
// for the graphs' products of the precisions whose rows are, gonum's for the others. (Sums on
// one library and graphs on another were measured too, and were not faster:
// docs/benchmarks.md.)
func choose(libs []*Library, threads int) Choice {
	var first Choice
	for i, l := range libs {
		l.SetThreads(threads)
		im := l.Implementation()
		c := Choice{Impl: im, Graph: im}
		c.Graph.s32, c.Graph.d64 = rowsIndependent(im)
		if c.Graph.s32 && c.Graph.d64 {
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
	if c.Impl.lib == nil {
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
