#!/usr/bin/env python3
"""Compare dpsgd's DP-SGD step on the GPU with Opacus and JAX on the same GPU (docs/gpu.md).

Run on the GPU machine (PyTorch, Opacus and JAX installed there; none is part of this repo):

    python3 cuda/bench/opacus_compare.py --dpsgd ./bin/dpsgd --batches 256 1024 4096 --steps 50

What is compared, per model and batch size B (float32, summed cross-entropy, SGD, clip 1,
noise multiplier 1, a fixed batch of synthetic MNIST-shaped data already on the GPU):
  * models: the MNIST MLP 784-256-10 and the CNN of engine/nn (conv 16@8x8 s2 p3, pool 2 s1,
    conv 32@4x4 s2, pool 2 s1, dense 32, dense 10), ReLU;
  * dpsgd: `dpsgd bench step --device cuda --json` (the engine's CUDA backend: data on the
    device, only the batch's indices uploaded); DP examples/s and DP / non-private time, with
    --precision fp32 (and bf16 with --bf16);
  * Opacus, hooks: GradSampleModule + DPOptimizer (per-example gradients materialized);
  * Opacus, ghost clipping: GradSampleModuleFastGradientClipping (use_ghost_clipping) +
    DPOptimizerFastGradientClipping + DPLossFastGradientClipping, where the installed Opacus
    has them (else the row says why not);
  * JAX: jit(vmap(grad)) per-example gradients, clipping and Gaussian noise, the computation
    JAX Privacy's gradient clipping performs (not JAX Privacy's own trainer);
  * PyTorch without DP: the non-private examples/s of the same model.
Opacus and PyTorch are timed with CUDA events after 5 warm-up steps, JAX with
block_until_ready. Prints one JSON object with every number and the ratios dpsgd / Opacus
(goal ≥ 3 for both Opacus modes) and dpsgd's DP / non-private (goal ≤ 1.1).
"""
import argparse
import json
import os
import subprocess
import sys
import time

# The models have one definition, scripts/opacus_cpu.py's torch_model (the CPU comparison).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from opacus_cpu import torch_model  # noqa: E402

HIDDEN = {"mlp": "256", "cnn": "32"}


def torch_rate(model_name, batch, steps, mode):
    """Examples/s and ms/step of PyTorch: mode "plain", "hooks" (Opacus) or "ghost" (Opacus)."""
    import torch
    import torch.nn as nn

    dev = torch.device("cuda")
    model = torch_model(model_name).to(dev)
    x = torch.rand(batch, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    if mode == "hooks":
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer

        model = GradSampleModule(model)
        opt = DPOptimizer(opt, noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=batch)
    elif mode == "ghost":
        from opacus.grad_sample import GradSampleModuleFastGradientClipping
        from opacus.optimizers import DPOptimizerFastGradientClipping
        from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping

        model = GradSampleModuleFastGradientClipping(model, max_grad_norm=1.0, use_ghost_clipping=True, loss_reduction="sum")
        opt = DPOptimizerFastGradientClipping(opt, noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=batch,
                                              loss_reduction="sum")
        loss_fn = DPLossFastGradientClipping(model, opt, nn.CrossEntropyLoss(reduction="sum"), loss_reduction="sum")

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
    return {"examples_per_s": batch / (ms / 1e3), "ms_per_step": ms}


def jax_rate(model_name, batch, steps):
    """Examples/s of a jit-compiled DP-SGD step in JAX: per-example gradients by vmap(grad),
    each clipped to norm 1, summed, Gaussian noise (σ = 1), SGD."""
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    if model_name == "mlp":
        k1, k2 = jax.random.split(key)
        params = {"w1": jax.random.normal(k1, (784, 256)) * 0.05, "b1": jnp.zeros(256),
                  "w2": jax.random.normal(k2, (256, 10)) * 0.05, "b2": jnp.zeros(10)}

        def apply(p, x):
            h = jax.nn.relu(x.reshape(-1) @ p["w1"] + p["b1"])
            return h @ p["w2"] + p["b2"]
    else:
        ks = jax.random.split(key, 4)
        params = {"c1": jax.random.normal(ks[0], (16, 1, 8, 8)) * 0.05, "cb1": jnp.zeros(16),
                  "c2": jax.random.normal(ks[1], (32, 16, 4, 4)) * 0.05, "cb2": jnp.zeros(32),
                  "w1": jax.random.normal(ks[2], (512, 32)) * 0.05, "b1": jnp.zeros(32),
                  "w2": jax.random.normal(ks[3], (32, 10)) * 0.05, "b2": jnp.zeros(10)}

        def pool(h):
            return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 1, 1), "VALID")

        def apply(p, x):
            h = x.reshape(1, 1, 28, 28)
            h = jax.lax.conv_general_dilated(h, p["c1"], (2, 2), ((3, 3), (3, 3))) + p["cb1"][None, :, None, None]
            h = pool(jax.nn.relu(h))
            h = jax.lax.conv_general_dilated(h, p["c2"], (2, 2), "VALID") + p["cb2"][None, :, None, None]
            h = pool(jax.nn.relu(h)).reshape(-1)
            h = jax.nn.relu(h @ p["w1"] + p["b1"])
            return h @ p["w2"] + p["b2"]

    def loss(p, x, y):
        return -jax.nn.log_softmax(apply(p, x))[y]

    @jax.jit
    def step(p, x, y, k):
        g = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(p, x, y)
        sq = sum(jnp.sum(v.reshape(batch, -1) ** 2, axis=1) for v in jax.tree_util.tree_leaves(g))
        c = jnp.minimum(1.0, 1.0 / jnp.sqrt(sq + 1e-12))
        leaves, tree = jax.tree_util.tree_flatten(g)
        ks = jax.random.split(k, len(leaves))
        noisy = [jnp.tensordot(c, v, axes=1) + jax.random.normal(kk, v.shape[1:]) for v, kk in zip(leaves, ks)]
        s = jax.tree_util.tree_unflatten(tree, noisy)
        return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b / batch, p, s)

    x = jax.random.uniform(key, (batch, 1, 28, 28))
    y = jax.random.randint(key, (batch,), 0, 10)
    for i in range(5):
        params = step(params, x, y, jax.random.PRNGKey(i))
    jax.block_until_ready(params)
    t0 = time.perf_counter()
    for i in range(steps):
        params = step(params, x, y, jax.random.PRNGKey(100 + i))
    jax.block_until_ready(params)
    ms = (time.perf_counter() - t0) * 1e3 / steps
    return {"examples_per_s": batch / (ms / 1e3), "ms_per_step": ms}


def dpsgd_rate(binary, model_name, batch, steps, precision):
    out = subprocess.run([binary, "bench", "step", "--device", "cuda", "--dataset", "mnist", "--model", model_name,
                          "--hidden", HIDDEN[model_name], "--activation", "relu", "--batch-sizes", str(batch),
                          "--min-steps", str(steps), "--precision", precision, "--json", "--quiet"],
                         check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    row = json.loads(out)["rows"][0]
    if not row.get("available"):
        raise RuntimeError(row.get("note", "the GPU is not available"))
    return {"examples_per_s": row["dp_examples_per_second"], "ms_per_step": row["dp_ms_per_step"],
            "dp_over_nonprivate": row["ratio_dp_to_nonprivate"], "nonprivate_examples_per_s": row["nonprivate_examples_per_second"]}


def attempt(fn, *args):
    """fn's result, or {"unavailable": why} when it fails (a missing library, an Opacus
    without ghost clipping, out of memory at a large batch)."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 — every failure is reported, none stops the others
        return {"unavailable": f"{type(e).__name__}: {e}"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dpsgd", default="./bin/dpsgd")
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn"])
    ap.add_argument("--batches", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--bf16", action="store_true", help="also time dpsgd with --precision bf16")
    a = ap.parse_args()
    res = {"date": time.strftime("%Y-%m-%d"), "runs": []}
    for m in a.models:
        for b in a.batches:
            row = {"model": m, "batch": b,
                   "dpsgd_fp32": attempt(dpsgd_rate, a.dpsgd, m, b, a.steps, "fp32"),
                   "opacus_hooks": attempt(torch_rate, m, b, a.steps, "hooks"),
                   "opacus_ghost": attempt(torch_rate, m, b, a.steps, "ghost"),
                   "jax_vmap": attempt(jax_rate, m, b, a.steps),
                   "torch_nonprivate": attempt(torch_rate, m, b, a.steps, "plain")}
            if a.bf16:
                row["dpsgd_bf16"] = attempt(dpsgd_rate, a.dpsgd, m, b, a.steps, "bf16")
            ours = row["dpsgd_fp32"].get("examples_per_s")
            for other in ("opacus_hooks", "opacus_ghost", "jax_vmap"):
                theirs = row[other].get("examples_per_s")
                if ours and theirs:
                    row[f"dpsgd_over_{other}"] = ours / theirs
            res["runs"].append(row)
            print(json.dumps(row), flush=True)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
