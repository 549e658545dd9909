#!/usr/bin/env python3
"""dpsgd against Opacus on the CPU: the DP-SGD step's examples/s, same model, batch and threads.

Run from the repository root with PyTorch (Debian's python3-torch) and Opacus's source on
PYTHONPATH (Opacus is not part of this repository; fetch it, e.g. tag v1.4.0 for PyTorch 1.13):

    make build
    PYTHONPATH=/path/to/opacus-src python3 scripts/opacus_cpu.py --dpsgd ./bin/dpsgd \\
        --batches 256 1024 --rounds 5 --threads 2

What is compared, per model and logical batch B, in rounds that alternate the two libraries
(dpsgd, then Opacus, then dpsgd, ...) so that load from other processes hits both alike; the
best round of each is reported:
  * models: the MNIST MLP 784-256-10 and the MNIST CNN of engine/nn (conv 16@8x8 stride 2
    padding 3, max-pool 2 stride 1, conv 32@4x4 stride 2, max-pool 2 stride 1, dense 32,
    dense 10), ReLU, float32, summed cross-entropy, plain SGD, clip 1, noise multiplier 1;
  * dpsgd: `dpsgd bench step --device cpu --json` (its DP and non-private steps interleaved,
    physical batch min(256, B), GOMAXPROCS = --threads);
  * Opacus: GradSampleModule (per-sample gradients by hooks) + DPOptimizer on a fixed batch of
    random MNIST-shaped data, torch.set_num_threads(--threads), after warm-up steps; the same
    model without Opacus gives PyTorch's non-private rate.
Prints a table and, with --json, one JSON object: examples/s of each, and the ratios
dpsgd/Opacus (DP) and DP/non-private for each library. Opacus's version is recorded.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def torch_model(name):
    import torch.nn as nn

    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(
        nn.Conv2d(1, 16, 8, 2, padding=3), nn.ReLU(), nn.MaxPool2d(2, 1),
        nn.Conv2d(16, 32, 4, 2), nn.ReLU(), nn.MaxPool2d(2, 1),
        nn.Flatten(), nn.Linear(32 * 4 * 4, 32), nn.ReLU(), nn.Linear(32, 10))


def opacus_rates(name, batch, min_time):
    """DP and non-private examples/s of one model and batch with Opacus / plain PyTorch."""
    import torch
    import torch.nn as nn
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    x = torch.rand(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    out = {}
    for mode in ("dp", "nonprivate"):
        torch.manual_seed(1)
        model = torch_model(name)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        if mode == "dp":
            model = GradSampleModule(model)
            opt = DPOptimizer(opt, noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=batch)

        def step():
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()

        for _ in range(2):
            step()
        n, t0 = 0, time.perf_counter()
        while True:
            step()
            n += 1
            el = time.perf_counter() - t0
            if el >= min_time and n >= 3:
                break
        out[mode] = batch * n / el
    return out


def dpsgd_rates(binary, name, batch, threads, min_time):
    args = [binary, "bench", "step", "--device", "cpu", "--dataset", "mnist", "--model", name,
            "--activation", "relu", "--batch-sizes", str(batch), "--min-time", str(min_time),
            "--json", "--quiet"]
    if name == "cnn":
        args += ["--hidden", "32"]
    env = dict(os.environ, GOMAXPROCS=str(threads))
    res = subprocess.run(args, capture_output=True, text=True, env=env, check=True)
    row = json.loads(res.stdout.strip().splitlines()[-1])["rows"][0]
    return {"dp": row["dp_examples_per_second"], "nonprivate": row["nonprivate_examples_per_second"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dpsgd", default="./bin/dpsgd", help="the dpsgd binary")
    ap.add_argument("--batches", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn"], choices=["mlp", "cnn"])
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds; the best of each is kept")
    ap.add_argument("--threads", type=int, default=2, help="threads of both libraries")
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds of measurement per mode")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()
    import torch
    import opacus

    torch.set_num_threads(a.threads)
    best = {}
    for r in range(a.rounds):
        for m in a.models:
            for b in a.batches:
                for lib, f in (("dpsgd", lambda: dpsgd_rates(a.dpsgd, m, b, a.threads, a.min_time)),
                               ("opacus", lambda: opacus_rates(m, b, a.min_time))):
                    got = f()
                    key = (m, b, lib)
                    prev = best.get(key, {"dp": 0, "nonprivate": 0})
                    best[key] = {k: max(prev[k], got[k]) for k in got}
                print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    rows = []
    for m in a.models:
        for b in a.batches:
            d, o = best[(m, b, "dpsgd")], best[(m, b, "opacus")]
            rows.append({"model": m, "batch": b,
                         "dpsgd_dp": d["dp"], "dpsgd_nonprivate": d["nonprivate"],
                         "opacus_dp": o["dp"], "pytorch_nonprivate": o["nonprivate"],
                         "ratio_dp_dpsgd_to_opacus": d["dp"] / o["dp"],
                         "dpsgd_dp_to_nonprivate_time": d["nonprivate"] / d["dp"],
                         "opacus_dp_to_nonprivate_time": o["nonprivate"] / o["dp"]})
    meta = {"opacus": opacus.__version__, "torch": torch.__version__, "threads": a.threads,
            "rounds": a.rounds, "min_time": a.min_time}
    if a.json:
        print(json.dumps({"meta": meta, "rows": rows}))
        return
    print(f"Opacus {meta['opacus']}, PyTorch {meta['torch']}, {a.threads} threads, best of {a.rounds} rounds (examples/s)")
    print(f"{'model':6} {'batch':>6} {'dpsgd DP':>10} {'Opacus DP':>10} {'ratio':>6} {'dpsgd np':>10} {'torch np':>10}")
    for r in rows:
        print(f"{r['model']:6} {r['batch']:>6} {r['dpsgd_dp']:>10.0f} {r['opacus_dp']:>10.0f} "
              f"{r['ratio_dp_dpsgd_to_opacus']:>6.2f} {r['dpsgd_nonprivate']:>10.0f} {r['pytorch_nonprivate']:>10.0f}")


if __name__ == "__main__":
    main()
