package main

import (
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/dpsgd/dpsgd/internal/fastblas"
	"github.com/spf13/pflag"
)

// blasFlag is the value of --blas: one of fastblas.Names, checked when the flag is parsed, or
// "" (the default: DPSGD_BLAS, else auto), so that every value it writes reads back.
type blasFlag struct{ dst *string }

func (f blasFlag) String() string {
	if f.dst == nil {
		return ""
	}
	return *f.dst
}

func (f blasFlag) Set(s string) error {
	if s == "" {
		*f.dst = ""
		return nil
	}
	n, err := fastblas.ParseName(s)
	if err != nil {
		return err
	}
	*f.dst = string(n)
	return nil
}

func (blasFlag) Type() string { return "string" }

// addBLASFlag registers --blas on fs; *dst is "" until the flag is given.
func addBLASFlag(fs *pflag.FlagSet, dst *string) {
	fs.Var(blasFlag{dst}, "blas", "CPU BLAS for the matrix products: "+fastblas.NamesText()+
		"; auto uses the libraries installed (OpenBLAS, BLIS, MKL), else gonum's pure Go; a library runs "+
		"⌊cores / replicas⌋ threads (default: $"+fastblas.EnvVar+", else auto; docs/benchmarks.md)")
}

// blasSelect loads a BLAS: fastblas.Select, or a stand-in in tests.
type blasSelect func(n fastblas.Name, threads int) (fastblas.Choice, error)

// blasChoose resolves the BLAS of a run: --blas (flag, "" when not given) wins over
// DPSGD_BLAS (env, "" when unset), and auto is the default. A bad value, or a library named
// explicitly that cannot be loaded, is a usage error (exit 2) naming the flag or the variable.
func blasChoose(flag, env string, threads int, sel blasSelect) (fastblas.Choice, error) {
	src, v := "--blas", flag
	if flag == "" {
		src, v = fastblas.EnvVar, env
		if env == "" {
			v = string(fastblas.Auto)
		}
	}
	n, err := fastblas.ParseName(v)
	if err != nil {
		return fastblas.Choice{}, usagef("%s %q: %w", src, v, err)
	}
	c, err := sel(n, threads)
	if err != nil {
		return fastblas.Choice{}, usagef("%s: %w", src, err)
	}
	return c, nil
}

// blasPrepare chooses the run's BLAS (blasChoose, with DPSGD_BLAS from the environment) and
// pins the library's threads so that threads × graph replicas ≤ CPU cores (replicas 0: one
// per GOMAXPROCS, as engine.Config). It prints nothing and installs nothing: a command calls
// it with its other checks, so that a bad choice is its one usage error, and calls
// blasInstall once the run is about to start.
func blasPrepare(flag string, replicas int) (fastblas.Choice, error) {
	return blasPrepareWith(flag, replicas, fastblas.Select)
}

func blasPrepareWith(flag string, replicas int, sel blasSelect) (fastblas.Choice, error) {
	if replicas <= 0 {
		replicas = runtime.GOMAXPROCS(0)
	}
	return blasChoose(flag, os.Getenv(fastblas.EnvVar), fastblas.ThreadsFor(runtime.NumCPU(), replicas), sel)
}

// blasInstall installs c for the whole process (fastblas.Install), prints auto's note when
// it fell back to gonum (one line on stderr, unless quiet: the JSON's "blas" key says it too),
// and returns the description that the JSON reports under "blas". The caller defers
// blasRestore.
func blasInstall(c fastblas.Choice, quiet bool, stderr io.Writer) string {
	if c.Note != "" && !quiet {
		fmt.Fprintf(stderr, "dpsgd: %s\n", c.Note)
	}
	fastblas.Install(c)
	return c.Describe()
}

// blasRestore puts gonum's BLAS back when a command that installed another returns, so that
// one command's choice never outlives it (the tests run many commands in one process).
func blasRestore() { fastblas.Install(fastblas.Choice{}) }
