# dpsgd — build, run, test, bench. Every target installs what it needs through the Go module
# proxy (go.mod pins the versions); nothing else is required on a fresh machine but Go.

GO        ?= go
BIN       := bin/dpsgd
SHARED    ?= ../shared/datasets
# An execution count, not a duration: with a duration, Go 1.26's fuzz coordinator can fail a
# target with a bare "context deadline exceeded" at the time limit (golang/go#75804, fixed in
# Go 1.27). 50000 executions take 1–10 s per target here.
FUZZTIME  ?= 50000x
STATICCHECK_VERSION := v0.7.0

.PHONY: all build run test test-short vet lint fuzz bench bench-step bench-blas mnist-cnn mnist-mlp adult clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -o $(BIN) ./cmd/dpsgd

# The main job: train on the built-in synthetic dataset with DP and print accuracy and ε.
run: build
	./$(BIN) train

# Everything CI checks: formatting, vet, staticcheck, the whole test suite (race detector off:
# the suite is numeric and long), the kernels again without their assembly (build tag noasm,
# the pure-Go path other architectures run; purego selects the same files), and a short run of
# every fuzz target.
test: vet lint
	$(GO) test -count=1 -timeout 20m ./...
	$(GO) test -count=1 -tags noasm ./kernels ./internal/avxgemm ./internal/fastblas ./engine/nn
	$(MAKE) fuzz

test-short:
	$(GO) test -short -count=1 ./...

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || (gofmt -l . && echo "gofmt: files above need formatting" && exit 1)
	$(GO) vet ./...
	$(GO) vet -tags noasm ./kernels ./internal/avxgemm ./internal/fastblas ./engine/nn

lint:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# Every fuzz target for FUZZTIME executions (go test -fuzz takes one target per run).
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$t"; \
	    $(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

bench:
	$(GO) test -run='^$$' -bench=. -benchtime=2s ./kernels ./engine/... ./federated ./ageaware

# DP step against non-private step, MLP 784-256-10, batch 256 (the ratio in docs/benchmarks.md).
bench-step:
	$(GO) test -run='^$$' -bench='Step' -benchtime=3s -count=3 ./engine

# The optional CPU BLAS (internal/fastblas): SGEMM 1024³ and the MLP and CNN DP steps on gonum's
# pure Go, on dpsgd's AVX-512 kernels and on each installed library (OpenBLAS, BLIS, MKL), with PyTorch's SGEMM on 2 threads
# when $(PYTHON) has torch, interleaved over BLAS_ROUNDS rounds in one run (docs/benchmarks.md).
# Needs none of them: an absent library or torch is skipped with a line saying so.
PYTHON     ?= python3
BLAS_ROUNDS ?= 3
TORCH_SGEMM := import time, torch; torch.set_num_threads(2); a = torch.randn(1024, 1024); b = torch.randn(1024, 1024); [a @ b for _ in range(3)]; n = 20; t = time.perf_counter(); [a @ b for _ in range(n)]; d = (time.perf_counter() - t) / n; print(f"torch {torch.__version__} SGEMM 1024, {torch.get_num_threads()} threads: {2 * 1024**3 / d / 1e9:.1f} GFLOP/s")
bench-blas:
	$(GO) test -c -o bin/fastblas.test ./internal/fastblas
	$(GO) test -c -o bin/engine.test ./engine
	@for i in $$(seq $(BLAS_ROUNDS)); do \
	  echo "round $$i"; \
	  ./bin/fastblas.test -test.run='^$$' -test.bench=Sgemm1024 -test.benchtime=10x | grep -E '^Benchmark|_test.go'; \
	  ./bin/engine.test -test.run='^$$' -test.bench=StepBLAS -test.benchtime=20x | grep -E '^Benchmark|_test.go'; \
	  $(PYTHON) -c '$(TORCH_SGEMM)' 2>/dev/null || echo "torch: not importable by $(PYTHON)"; \
	done

# The measured runs of docs/benchmarks.md (real data from $(SHARED)).
mnist-cnn: build
	./$(BIN) train --dataset mnist --data-dir $(SHARED)/mnist --model cnn --sampler poisson --target-epsilon 3 --delta 1e-5 --json
mnist-mlp: build
	./$(BIN) train --dataset mnist --data-dir $(SHARED)/mnist --model mlp --sampler poisson --target-epsilon 3 --delta 1e-5 --json
adult: build
	./$(BIN) train --dataset adult --data-dir $(SHARED)/uci-adult --model logreg --sampler poisson --target-epsilon 1 --delta 1e-5 --json

clean:
	rm -rf bin

# Rebuild kernels/cuda/dpsgd.ptx from dpsgd.cu: nvcc (compute_90) when present, else clang
# (CLANG=path; clang-14 from Debian works unpacked, without CUDA). The PTX is committed;
# TestPTXMatchesSource fails when dpsgd.cu changed and the PTX was not rebuilt.
.PHONY: ptx
ptx:
	sh kernels/cuda/mkptx.sh
