#!/usr/bin/env python3
"""Writes a BF16 capture of linear layers for the GEMM-error benchmark (bench/bench_gemm_error.sh).

    python3 bench/make_gemm_capture.py OUT_DIR --layers L --tokens M --in K --out N [--seed 0]

One file, OUT_DIR/step_000001.safetensors (step 1), with per layer "layers.I.mlp.linear_fc1":
X [M, K] (activation), W [N, K] (weight), dY [M, N] (gradient), the roles make_big_capture.py
writes. Values: X ~ N(0, 1), W ~ 0.02 N(0, 1), dY ~ 1e-6 z^3 (z ~ N(0, 1)), from
numpy.random.default_rng(seed). float32 -> BF16 by ml_dtypes (round to nearest even). Needs numpy
and ml_dtypes only (no torch): written by the Python package's safetensors writer
(python/fp8a_safetensors.py).
"""

import argparse
import os
import sys

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fp8a_safetensors  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description="write a BF16 GEMM-layer capture")
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--in", dest="k", type=int, default=4096)
    ap.add_argument("--out", dest="n", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    tensors = {}
    for layer in range(a.layers):
        name = "layers.%d.mlp.linear_fc1" % layer
        x = rng.standard_normal((a.tokens, a.k), dtype=np.float32)
        w = 0.02 * rng.standard_normal((a.n, a.k), dtype=np.float32)
        dy = 1e-6 * rng.standard_normal((a.tokens, a.n), dtype=np.float32) ** 3
        for role, t in (("activation", x), ("weight", w), ("gradient", dy)):
            tensors[name + "." + role] = ("BF16", t.shape, t.astype(ml_dtypes.bfloat16).view(np.uint16))
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "step_000001.safetensors")
    fp8a_safetensors.write_safetensors(path, tensors, {"step": "1"})
    print("wrote %s (%d layers, X [%d, %d], W [%d, %d], dY [%d, %d], %.1f MB)"
          % (path, a.layers, a.tokens, a.k, a.n, a.k, a.tokens, a.n, os.path.getsize(path) / 1e6))


if __name__ == "__main__":
    main()
