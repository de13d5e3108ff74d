#!/usr/bin/env python3
"""Writes a single-tensor BF16 safetensors file for the benchmark.

    python3 bench/make_bench_tensor.py OUT.safetensors [--elements N] [--cols 4096] [--seed 0]

The tensor is named "bench.activation", shape [N / cols, cols] (default N = 16M = 16777216,
shape [4096, 4096]), values N(0,1) from numpy.random.default_rng(seed) with 16 outliers of
magnitude 50..500 at random positions. float32 -> BF16 uses round-to-nearest-even on the bits.
Needs numpy and torch: the file is written by the capture hook's safetensors writer
(python/fp8a_capture.py), the one writer of the Python tools.
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fp8a_capture  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description="write a BF16 benchmark tensor")
    ap.add_argument("out", metavar="NAME")
    ap.add_argument("--elements", type=int, default=16 * 1024 * 1024)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="bench.activation")
    args = ap.parse_args(argv)
    if args.elements <= 0 or args.cols <= 0 or args.elements % args.cols:
        ap.error("--elements must be a positive multiple of --cols")
    rows = args.elements // args.cols

    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal(args.elements, dtype=np.float32)
    n_out = min(16, args.elements)
    pos = rng.choice(args.elements, size=n_out, replace=False)
    x[pos] = (rng.uniform(50.0, 500.0, size=n_out) *
              rng.choice([-1.0, 1.0], size=n_out)).astype(np.float32)

    bits = x.view(np.uint32)
    bf16 = ((bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16).astype("<u2")

    tensor = torch.from_numpy(bf16.view(np.int16).reshape(rows, args.cols)).view(torch.bfloat16)
    fp8a_capture.write_safetensors(
        args.out, {args.name: tensor},
        {"step": "0", "generator": "bench/make_bench_tensor.py", "seed": str(args.seed)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
