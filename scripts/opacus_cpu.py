#!/usr/bin/env python3
"""dpsgd against Opacus on the CPU: the DP-SGD step's examples/s, same model, batch and threads.

Run from the repository root with PyTorch (Debian's python3-torch) and Opacus's source on
PYTHONPATH (Opacus is not part of this repository; fetch it, e.g. tag v1.4.0 for PyTorch 1.13):

    make build
    PYTHONPATH=/path/to/opacus-src python3 scripts/opacus_cpu.py --dpsgd ./bin/dpsgd \\
        --batches 256 1024 --rounds 5 --threads 2

Opacus 1.4's source imports opt_einsum; where that package is missing, a directory SHIM with
opt_einsum/__init__.py ("from .contract import contract") and opt_einsum/contract.py defining
contract(*args, **kwargs) as torch.einsum(*args) on PYTHONPATH (PYTHONPATH=OPACUS:SHIM) stands in.

What is compared, per model and logical batch B, in rounds that alternate the two libraries
(dpsgd, then Opacus, then dpsgd, ...) so that load from other processes hits both alike; the
best round of each is reported:
  * models: the MNIST MLP 784-256-10 and the MNIST CNN of engine/nn (conv 16@8x8 stride 2
    padding 3, max-pool 2 stride 1, conv 32@4x4 stride 2, max-pool 2 stride 1, dense 32,
    dense 10), ReLU, float32, summed cross-entropy, plain SGD, clip 1, noise multiplier 1;
    with --models transformer also the transformer preset (TorchTransformer: Opacus's
    DPMultiheadAttention for DP, nn.MultiheadAttention for PyTorch's non-private rate);
    with --models wrn16-4, WideResNet-16-4 (GroupNorm, weight-standardized convolutions) on
    CIFAR-10-shaped data (torch_wrn; one warm-up and at least one measured step: it is slow);
  * dpsgd: `dpsgd bench step --device cpu --json` (its DP and non-private steps interleaved,
    GOMAXPROCS = --threads, so as many graph replicas). dpsgd runs a logical batch's physical
    batches on its replicas in parallel, so --physical-batch 0 (the default here) takes
    min(256, ceil(B / threads)): at B = 256 on 2 threads two physical batches of 128, one per
    core, where a single one of 256 would leave a core idle (`dpsgd train --physical-batch 128`
    does the same; the physical batch changes no privacy figure). --physical-batch 256 gives
    dpsgd train's default;
  * Opacus: GradSampleModule (per-sample gradients by hooks) + DPOptimizer on a fixed batch of
    random MNIST-shaped data, torch.set_num_threads(--threads), after warm-up steps; the same
    model without Opacus gives PyTorch's non-private rate.
Prints a table and, with --json, one JSON object: examples/s of each (best round), the ratios
dpsgd/Opacus (DP) and DP/non-private for each library taken within each round (the two
libraries' runs of a round are adjacent, so load from other processes hits both alike) and
their median and range over the rounds, and the load average before and after. Opacus's
version is recorded.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


class TorchTransformer:
    """The transformer preset of engine/nn (nn.Transformer) in PyTorch, sequence-first: the 7×7
    patches of a 28×28 image as 16 tokens (unfold, then a linear map: the convolution of kernel
    and stride 7), a learned positional embedding (nn.Embedding of the positions, which Opacus's
    hooks support), 2 pre-LN blocks (LayerNorm, 4-head self-attention, residual; LayerNorm,
    dense 128, exact GELU, dense 64, residual), a final LayerNorm, the mean over tokens and the
    output layer. The attention is Opacus's DPMultiheadAttention (separate q, k, v and output
    linear layers: the hooks' per-sample gradients) with dp, PyTorch's nn.MultiheadAttention
    without. Every layer with parameters sees (tokens, batch, features) tensors, so that one
    GradSampleModule(batch_first=False) serves them all."""

    @staticmethod
    def build(dp):
        import torch
        import torch.nn as nn

        d, heads, tokens, patch = 64, 4, 16, 7
        if dp:
            from opacus.layers import DPMultiheadAttention as MHA
        else:
            MHA = nn.MultiheadAttention

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln1, self.attn = nn.LayerNorm(d), MHA(d, heads)
                self.ln2 = nn.LayerNorm(d)
                self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

            def forward(self, x):
                h = self.ln1(x)
                x = x + self.attn(h, h, h, need_weights=False)[0]
                return x + self.mlp(self.ln2(x))

        class ViT(nn.Module):
            def __init__(self):
                super().__init__()
                self.unfold = nn.Unfold(patch, stride=patch)
                self.patch = nn.Linear(patch * patch, d)
                self.pos = nn.Embedding(tokens, d)
                self.blocks = nn.Sequential(Block(), Block())
                self.ln, self.out = nn.LayerNorm(d), nn.Linear(d, 10)

            def forward(self, x):
                p = self.unfold(x).permute(2, 0, 1)  # tokens × batch × 49
                ids = torch.arange(tokens).unsqueeze(1).expand(tokens, x.shape[0])
                h = self.blocks(self.patch(p) + self.pos(ids))
                return self.out(self.ln(h).mean(0, keepdim=True)).squeeze(0)

        return ViT()


def torch_wrn(depth=16, width=4, classes=10):
    """WideResNet-depth-width as dpsgd's wrn16-4 builds it (engine/nn.WideResNet): GroupNorm of 16
    groups, weight-standardized convolutions (PyTorch has none: WSConv2d, a Conv2d whose forward
    standardizes each output channel's weights, ε = 1e-5, population variance), pre-activation
    blocks with a 1×1 projection where the shape changes, ReLU, global average pooling. Opacus
    has no per-sample rule for WSConv2d and computes its per-sample gradients with functorch."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class WSConv2d(nn.Conv2d):
        def forward(self, x):
            w = self.weight
            m = w.mean(dim=(1, 2, 3), keepdim=True)
            v = w.var(dim=(1, 2, 3), keepdim=True, unbiased=False)
            return F.conv2d(x, (w - m) / torch.sqrt(v + 1e-5), self.bias, self.stride, self.padding)

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.proj = cin != cout or stride != 1
            self.n1, self.c1 = nn.GroupNorm(16, cin), WSConv2d(cin, cout, 3, stride, 1)
            self.n2, self.c2 = nn.GroupNorm(16, cout), WSConv2d(cout, cout, 3, 1, 1)
            self.sc = WSConv2d(cin, cout, 1, stride, 0) if self.proj else None

        def forward(self, x):
            a = F.relu(self.n1(x))
            y = self.c2(F.relu(self.n2(self.c1(a))))
            return y + (self.sc(a) if self.proj else x)

    layers, c = [WSConv2d(3, 16, 3, 1, 1)], 16
    for stage, f in enumerate([16 * width, 32 * width, 64 * width]):
        for b in range((depth - 4) // 6):
            layers.append(Block(c, f, 2 if stage > 0 and b == 0 else 1))
            c = f
    layers += [nn.GroupNorm(16, c), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes)]
    return nn.Sequential(*layers)


def torch_model(name, dp=False):
    import torch.nn as nn

    if name == "transformer":
        return TorchTransformer.build(dp)
    if name == "wrn16-4":
        return torch_wrn()
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

    x = torch.rand(batch, 3, 32, 32) if name == "wrn16-4" else torch.rand(batch, 1, 28, 28)
    # The WideResNet takes seconds a step on two cores: one warm-up step and one measured.
    warm, min_steps = (1, 1) if name == "wrn16-4" else (2, 3)
    y = torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    out = {}
    for mode in ("dp", "nonprivate"):
        torch.manual_seed(1)
        model = torch_model(name, dp=mode == "dp")
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        if mode == "dp":
            model = GradSampleModule(model, batch_first=name != "transformer", loss_reduction="sum")
            opt = DPOptimizer(opt, noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=batch)

        def step():
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()

        for _ in range(warm):
            step()
        n, t0 = 0, time.perf_counter()
        while True:
            step()
            n += 1
            el = time.perf_counter() - t0
            if el >= min_time and n >= min_steps:
                break
        out[mode] = batch * n / el
    return out


def physical_batch(batch, threads, given):
    """dpsgd's physical batch: the given one, or min(256, ceil(batch / threads))."""
    if given > 0:
        return min(given, batch)
    return min(256, -(-batch // max(1, threads)))


def dpsgd_rates(binary, name, batch, threads, min_time, phys):
    args = [binary, "bench", "step", "--device", "cpu", "--dataset", "mnist", "--model", name,
            "--activation", "relu", "--batch-sizes", str(batch), "--min-time", str(min_time),
            "--physical-batch", str(phys), "--json", "--quiet"]
    if name == "cnn":
        args += ["--hidden", "32"]
    if name == "wrn16-4":
        args[args.index("mnist")] = "cifar10"
        args += ["--min-steps", "1"]
    env = dict(os.environ, GOMAXPROCS=str(threads))
    res = subprocess.run(args, capture_output=True, text=True, env=env, check=True)
    row = json.loads(res.stdout.strip().splitlines()[-1])["rows"][0]
    return {"dp": row["dp_examples_per_second"], "nonprivate": row["nonprivate_examples_per_second"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dpsgd", default="./bin/dpsgd", help="the dpsgd binary")
    ap.add_argument("--batches", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn"], choices=["mlp", "cnn", "transformer", "wrn16-4"])
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds; the best of each is kept")
    ap.add_argument("--threads", type=int, default=2, help="threads of both libraries")
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds of measurement per mode")
    ap.add_argument("--physical-batch", type=int, default=0,
                    help="dpsgd's physical batch; 0: min(256, ceil(batch / threads))")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()
    import torch
    import opacus

    torch.set_num_threads(a.threads)
    load_before = os.getloadavg()
    best, rounds = {}, {}
    for r in range(a.rounds):
        for m in a.models:
            for b in a.batches:
                phys = physical_batch(b, a.threads, a.physical_batch)
                got = {"dpsgd": dpsgd_rates(a.dpsgd, m, b, a.threads, a.min_time, phys),
                       "opacus": opacus_rates(m, b, a.min_time)}
                for lib, g in got.items():
                    prev = best.get((m, b, lib), {"dp": 0, "nonprivate": 0})
                    best[(m, b, lib)] = {k: max(prev[k], g[k]) for k in g}
                d, o = got["dpsgd"], got["opacus"]
                rounds.setdefault((m, b), []).append({
                    "dpsgd_to_opacus": d["dp"] / o["dp"],
                    "dpsgd_dp_to_nonprivate_time": d["nonprivate"] / d["dp"],
                    "opacus_dp_to_nonprivate_time": o["nonprivate"] / o["dp"],
                    "load": os.getloadavg()[0]})
        print(f"round {r + 1}/{a.rounds} done, load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    rows = []
    for m in a.models:
        for b in a.batches:
            d, o, rs = best[(m, b, "dpsgd")], best[(m, b, "opacus")], rounds[(m, b)]
            row = {"model": m, "batch": b, "physical_batch": physical_batch(b, a.threads, a.physical_batch),
                   "dpsgd_dp": d["dp"], "dpsgd_nonprivate": d["nonprivate"],
                   "opacus_dp": o["dp"], "pytorch_nonprivate": o["nonprivate"],
                   "per_round": rs}
            for k in ("dpsgd_to_opacus", "dpsgd_dp_to_nonprivate_time", "opacus_dp_to_nonprivate_time"):
                v = [x[k] for x in rs]
                row[k + "_median"], row[k + "_min"], row[k + "_max"] = statistics.median(v), min(v), max(v)
            rows.append(row)
    meta = {"opacus": opacus.__version__, "torch": torch.__version__, "threads": a.threads,
            "rounds": a.rounds, "min_time": a.min_time,
            "load_average_before": load_before, "load_average_after": os.getloadavg()}
    if a.json:
        print(json.dumps({"meta": meta, "rows": rows}))
        return
    print(f"Opacus {meta['opacus']}, PyTorch {meta['torch']}, {a.threads} threads, {a.rounds} rounds; "
          f"examples/s: best round; ratios: median over rounds [range]; load average "
          f"{load_before[0]:.1f} before, {meta['load_average_after'][0]:.1f} after")
    print(f"{'model':6} {'batch':>6} {'phys':>5} {'dpsgd DP':>10} {'Opacus DP':>10} {'dpsgd/Opacus':>20} "
          f"{'dpsgd np':>10} {'torch np':>10} {'dpsgd DP/np time':>20} {'Opacus DP/np time':>20}")

    def rng(r, k):
        return f"{r[k + '_median']:.2f} [{r[k + '_min']:.2f}, {r[k + '_max']:.2f}]"
    for r in rows:
        print(f"{r['model']:6} {r['batch']:>6} {r['physical_batch']:>5} {r['dpsgd_dp']:>10.0f} {r['opacus_dp']:>10.0f} "
              f"{rng(r, 'dpsgd_to_opacus'):>20} {r['dpsgd_nonprivate']:>10.0f} {r['pytorch_nonprivate']:>10.0f} "
              f"{rng(r, 'dpsgd_dp_to_nonprivate_time'):>20} {rng(r, 'opacus_dp_to_nonprivate_time'):>20}")


if __name__ == "__main__":
    main()
