"""Loads a dpsgd safetensors file into PyTorch's equivalent nn.Sequential and prints its logits.

Usage: python3 torch_check.py WEIGHTS.safetensors INPUTS.json [WEIGHTS INPUTS ...]
INPUTS.json is {"shape": [B, ...], "x": [flat row-major values]}. The file is parsed with json and
struct only (no safetensors package). The module is the one the file's metadata names
("dpsgd.sequential"); load_state_dict is strict, so every name and shape must match. Prints
{"logits": [LOGITS, ...], "torch": VERSION} on stdout, LOGITS the [B, K] logits of each pair.
"""
import json
import struct
import sys

import torch
from torch import nn


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    buf = data[8 + n :]
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        fmt, dtype = {"F32": ("f", torch.float32), "F64": ("d", torch.float64)}[info["dtype"]]
        count = (end - begin) // struct.calcsize(fmt)
        values = struct.unpack("<%d%s" % (count, fmt), buf[begin:end])
        tensors[name] = torch.tensor(values, dtype=dtype).reshape(info["shape"])
    return tensors, meta


def logits(weights, inputs_path):
    tensors, meta = load_safetensors(weights)
    with open(inputs_path) as f:
        inputs = json.load(f)
    # The test wrote this file itself; never eval the metadata of a file you did not make.
    model = eval(meta["dpsgd.sequential"], {"nn": nn})
    dtype = next(iter(tensors.values())).dtype
    model = model.to(dtype)
    model.load_state_dict(tensors, strict=True)
    x = torch.tensor(inputs["x"], dtype=dtype).reshape(inputs["shape"])
    with torch.no_grad():
        return model(x).tolist()


def main():
    args = sys.argv[1:]
    out = [logits(args[i], args[i + 1]) for i in range(0, len(args), 2)]
    json.dump({"logits": out, "torch": torch.__version__}, sys.stdout)


if __name__ == "__main__":
    main()
