package cuda

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

//go:embed testdata/fake/fakecuda.c
var fakeSource string

// BuildFakeDriver compiles the fake CUDA driver and cuBLAS of cuda/testdata/fake, which run the
// kernel source kernelSource (the text of dpsgd.cu, which package kernels/cuda embeds as
// Source()) on the CPU (see that file), with the machine's gcc into dir and
// returns their paths, for tests and CI without a GPU (set DPSGD_LIBCUDA / DPSGD_LIBCUBLAS
// to them, or pass them in Options). It fails when gcc is missing.
func BuildFakeDriver(dir, kernelSource string) (libcuda, libcublas string, err error) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return "", "", errors.New("gcc not found: the fake CUDA driver cannot be built")
	}
	src := filepath.Join(dir, "fakecuda.c")
	if err := os.WriteFile(src, []byte(fakeSource), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "dpsgd.cu"), []byte(kernelSource), 0o644); err != nil {
		return "", "", err
	}
	libcuda, libcublas = filepath.Join(dir, "libcuda.so.1"), filepath.Join(dir, "libcublas.so.13")
	base := []string{"-O2", "-shared", "-fPIC", "-ffp-contract=off", "-I", dir}
	drv := append(append([]string{}, base...), "-Wl,-soname,libcuda.so.1", "-o", libcuda, src, "-lm")
	blas := append(append([]string{}, base...), "-DFAKE_CUBLAS", "-Wl,-soname,libcublas.so.13", "-o", libcublas, src,
		"-L", dir, "-l:libcuda.so.1", "-Wl,-rpath,$ORIGIN", "-lm")
	for _, args := range [][]string{drv, blas} {
		if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("building the fake CUDA driver: gcc %v: %v\n%s", args, err, out)
		}
	}
	return libcuda, libcublas, nil
}
