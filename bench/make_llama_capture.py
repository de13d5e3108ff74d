#!/usr/bin/env python3
"""Writes BF16 captures of Llama-2-shaped linear layers for the GEMM-error benchmark at real
model sizes (issue 35).

    python3 bench/make_llama_capture.py CASE OUT_DIR [--tokens M] [--layers L] [--seed 0]

CASE (Megatron layer names, X [M, K], W [N, K], dY [M, N] per linear layer; M = --tokens):
  7b-layer  one Llama-2-7B layer, M = 4096:  layers.0.self_attention.linear_qkv (4096 -> 12288),
            layers.0.self_attention.linear_proj (4096 -> 4096), layers.0.mlp.linear_fc1
            (4096 -> 22016, gate and up fused), layers.0.mlp.linear_fc2 (11008 -> 4096);
            ~0.95 GB at M = 4096.
  7b-model  the same for L layers (--layers, default 32), layers.0 ... layers.L-1; ~30 GB at
            M = 4096 and 32 layers.
  70b-fc1   one Llama-2-70B fc1, M = 1024: layers.0.mlp.linear_fc1 (8192 -> 57344); ~1.2 GB at
            M = 1024, ~1.5 GB at M = 4096.

Values, as bench/make_gemm_capture.py, plus outliers: X ~ N(0, 1) with 6 fixed outlier columns
(channels) x 40, the same columns in every token and layer of one K (listed in the activation
file's __metadata__["outlier_columns"]); W ~ 0.02 N(0, 1); dY ~ 1e-6 z^3 (z ~ N(0, 1)).
float32 -> BF16 by ml_dtypes (round to nearest even). Each tensor has its own generator,
numpy.random.default_rng([seed, layer, linear, role]), so a tensor's values do not depend on the
case, --layers or the order of generation (layers 0-3 of `7b-model --layers 4` are those of the
32-layer model).

Layout: one safetensors file per tensor, so the generator holds one BF16 tensor (plus a 64 MB
float32 chunk) at a time; peak RSS ~1.1 GB for 70b-fc1 at M = 4096. The python writer
(python/fp8a_safetensors.py) takes all of a file's tensors in memory, and the reader
(datasets/capture.cpp) keys each tensor by (step, <layer>, <role>) from its name, whatever file it
is in, reading folders recursively; the step is __metadata__["step"] (here "1"), else the last
number in the file name (here 000001 too). So one capture of step 1 is

    OUT_DIR/<layer>/step_000001.activation.safetensors   tensor "<layer>.activation"  X [M, K]
    OUT_DIR/<layer>/step_000001.weight.safetensors       tensor "<layer>.weight"      W [N, K]
    OUT_DIR/<layer>/step_000001.gradient.safetensors     tensor "<layer>.gradient"    dY [M, N]

e.g. OUT_DIR/layers.0.mlp.linear_fc1/step_000001.weight.safetensors; pass OUT_DIR to
`fp8-advisor run --capture`. No folder is named rank*, so every tensor has rank -1 (unsharded).
OUT_DIR must not hold other *.safetensors files (a capture of another case or layer count would
be read along): the generator refuses then.

Needs numpy and ml_dtypes only (no torch).
"""

import argparse
import os
import sys
import time

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp8a_safetensors  # noqa: E402

STEP = 1
OUTLIER_COLUMNS = 6
OUTLIER_FACTOR = 40.0
CHUNK_BYTES = 64 << 20  # float32 rows generated at a time

import llama_shapes  # noqa: E402
ROLES = ("activation", "weight", "gradient")


def outlier_columns(k):
    """The 6 outlier channels of an activation of width k: fixed (independent of --seed)."""
    return np.sort(np.random.default_rng([35, k]).choice(k, OUTLIER_COLUMNS, replace=False))


def generate(rng, role, rows, cols, k_outliers):
    """A [rows, cols] BF16 tensor of `role`, generated in float32 chunks of CHUNK_BYTES."""
    out = np.empty((rows, cols), dtype=ml_dtypes.bfloat16)
    step = max(1, CHUNK_BYTES // (4 * cols))
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        c = rng.standard_normal((r1 - r0, cols), dtype=np.float32)
        if role == "activation":
            c[:, k_outliers] *= np.float32(OUTLIER_FACTOR)
        elif role == "weight":
            c *= np.float32(0.02)
        else:
            np.power(c, 3, out=c)
            c *= np.float32(1e-6)
        out[r0:r1] = c.astype(ml_dtypes.bfloat16)
        del c
    return out


def main():
    ap = argparse.ArgumentParser(description="write a BF16 capture of Llama-2-shaped linear layers")
    llama_shapes.add_case_arguments(ap)
    ap.add_argument("out")
    llama_shapes.add_size_arguments(ap)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    linears, tokens, layers = llama_shapes.case_of(ap, a)
    if a.seed < 0:
        ap.error("--seed must be >= 0")

    jobs = []  # (layer name, layer index, linear index, K, N)
    for layer in range(layers):
        for li, (name, k, n) in enumerate(linears):
            jobs.append(("layers.%d.%s" % (layer, name), layer, li, k, n))
    paths = {os.path.join(a.out, j[0], "step_%06d.%s.safetensors" % (STEP, role))
             for j in jobs for role in ROLES}
    if os.path.isdir(a.out):
        stray = []
        for d, _, files in os.walk(a.out):
            stray += [os.path.join(d, f) for f in files
                      if f.endswith(".safetensors") and os.path.join(d, f) not in paths]
        if stray:
            sys.exit("%s holds %d other .safetensors files (e.g. %s): they would be read with this "
                     "capture; use an empty folder" % (a.out, len(stray), sorted(stray)[0]))

    t0 = time.time()
    total = 0
    for name, layer, li, k, n in jobs:
        os.makedirs(os.path.join(a.out, name), exist_ok=True)
        cols = outlier_columns(k)
        shapes = {"activation": (tokens, k), "weight": (n, k), "gradient": (tokens, n)}
        for ri, role in enumerate(ROLES):
            rng = np.random.default_rng([a.seed, layer, li, ri])
            t = generate(rng, role, *shapes[role], cols)
            meta = {"step": str(STEP)}
            if role == "activation":
                meta["outlier_columns"] = ",".join(str(int(c)) for c in cols)
                meta["outlier_factor"] = str(OUTLIER_FACTOR)
            path = os.path.join(a.out, name, "step_%06d.%s.safetensors" % (STEP, role))
            fp8a_safetensors.write_safetensors(
                path, {name + "." + role: ("BF16", t.shape, t.view(np.uint16))}, meta)
            total += os.path.getsize(path)
            del t
        print("  %s: X [%d, %d], W [%d, %d], dY [%d, %d]" % (name, tokens, k, n, k, tokens, n),
              flush=True)
    folder = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(a.out) for f in fs)
    print("wrote %s: case %s, %d layers, %d linear layers, %d files (%.3f GB) in %.1f s; "
          "folder size %.3f GB (%.2f GiB)" % (a.out, a.case, layers, len(jobs), len(paths),
                                             total / 1e9, time.time() - t0, folder / 1e9, folder / 2**30))


if __name__ == "__main__":
    main()
