#!/usr/bin/env python3
"""Compare dpsgd's DP-SGD step on the GPU with Opacus on the same GPU (docs/gpu.md).

Run on the GPU machine (PyTorch and Opacus installed there; Opacus is not part of this repo):

    python3 cuda/bench/opacus_compare.py --dpsgd ./bin/dpsgd --batches 256 1024 --steps 50

What is compared, per batch size B:
  * model: MNIST MLP 784-256-10 (ReLU) and, for Opacus only until the device backend has
    convolutions, the CNN of engine/nn (conv 16@8x8 s2 p3, pool 2 s1, conv 32@4x4 s2, pool 2 s1,
    dense 32, dense 10, ReLU); float32; summed cross-entropy; SGD;
  * Opacus: GradSampleModule + DPOptimizer (noise multiplier 1, clip 1, Poisson sampling off:
    fixed batch B of synthetic MNIST-shaped data already on the GPU), timed with CUDA events
    after 5 warm-up steps: DP examples/s = B / step time; the same model without Opacus gives
    the non-private examples/s;
  * dpsgd: `dpsgd selftest --json --batch B` runs the same MLP step on the device (data on the
    device, only indices uploaded); DP examples/s = B / dp_step_ms.
Prints one JSON object with every number and the ratios dpsgd/Opacus (goal ≥ 1.5) and
DP/non-private (goal ≤ 1.2).
"""
import argparse
import json
import subprocess
import time


def opacus_rate(model_name, batch, steps, dp):
    import torch
    import torch.nn as nn

    dev = torch.device("cuda")
    if model_name == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    else:
        model = nn.Sequential(
            nn.Conv2d(1, 16, 8, 2, padding=3), nn.ReLU(), nn.MaxPool2d(2, 1),
            nn.Conv2d(16, 32, 4, 2), nn.ReLU(), nn.MaxPool2d(2, 1),
            nn.Flatten(), nn.Linear(32 * 4 * 4, 32), nn.ReLU(), nn.Linear(32, 10))
    model = model.to(dev)
    x = torch.rand(batch, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    if dp:
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer
        model = GradSampleModule(model)
        opt = DPOptimizer(opt, noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=batch)

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(steps):
        step()
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / steps
    return batch / (ms / 1e3), ms


def dpsgd_rate(binary, batch, steps):
    out = subprocess.run([binary, "selftest", "--json", "--batch", str(batch), "--reps", str(steps), "--draws", "1000000"],
                         check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    r = json.loads(out)
    return batch / (r["dp_step_ms"] / 1e3), r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dpsgd", default="./bin/dpsgd")
    ap.add_argument("--batches", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--steps", type=int, default=50)
    a = ap.parse_args()
    res = {"date": time.strftime("%Y-%m-%d"), "runs": []}
    for b in a.batches:
        ours, raw = dpsgd_rate(a.dpsgd, b, a.steps)
        row = {"batch": b, "dpsgd_mlp_dp_examples_per_s": ours, "dpsgd_selftest": raw}
        for m in ("mlp", "cnn"):
            dp, dp_ms = opacus_rate(m, b, a.steps, True)
            plain, plain_ms = opacus_rate(m, b, a.steps, False)
            row[f"opacus_{m}_dp_examples_per_s"] = dp
            row[f"torch_{m}_nonprivate_examples_per_s"] = plain
            row[f"opacus_{m}_dp_over_nonprivate_time"] = dp_ms / plain_ms
        row["dpsgd_over_opacus_mlp"] = ours / row["opacus_mlp_dp_examples_per_s"]
        res["runs"].append(row)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
