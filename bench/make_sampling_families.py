#!/usr/bin/env python3
"""Writes BF16 single-layer captures of seven value families for the GEMM-sampling benchmark (issue 54).

    python3 bench/make_sampling_families.py OUT_ROOT --families abcdefg --seeds 6 [--tokens 4096 --in 4096 --out 4096]

One capture directory OUT_ROOT/<family>-<seed>/ (e.g. b-3) for every family letter and seed
0..seeds-1, each one file step_000001.safetensors (step 1) with one layer "layers.0.mlp.linear_fc1":
X [M, K] (activation), W [N, K] (weight), dY [M, N] (gradient), named and written as
make_gemm_capture.py does. Values from numpy.random.default_rng(seed * 1000 + ord(family)), so each
capture is reproducible. Base values (every family): X ~ N(0, 1), W ~ 0.02 N(0, 1),
dY ~ 1e-6 N(0, 1); then per family:

  a: base only (X, W, dY Gaussian).
  b: LLM massive activations: 3 "sink" tokens = token 0 plus 2 distinct random tokens in [1, M);
     4 distinct random channels of K; X[sink, ch] = random sign * 10**uniform(3, 4) for each of the
     3 x 4 entries.
  c: 6 distinct random outlier channels of X: X[:, ch] *= uniform(50, 100) (one factor per channel).
  d: 4 distinct random rows of W (output channels): W[row, :] *= 100.
  e: 24 distinct random tokens carry the gradient: dY rows not among them *= 1e-4.
  f: dY = 1e-6 * sign(z) * exp(2 u), z, u ~ N(0, 1) independent (lognormal magnitudes, sigma 2).
  g: dY = 1e-6 * z**3, z ~ N(0, 1).

Generated in float32, one capture at a time; float32 -> BF16 by ml_dtypes (round to nearest even).
Needs numpy and ml_dtypes only (no torch): written by the Python package's safetensors writer
(python/fp8a_safetensors.py).
"""

import argparse
import os
import sys

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fp8a_safetensors  # noqa: E402

FAMILIES = "abcdefg"
LAYER = "layers.0.mlp.linear_fc1"


def make_family(family, rng, m, k, n):
    """X [m, k], W [n, k], dY [m, n] (float32) of one family, drawn from rng."""
    # Base values, drawn in the same order for every family.
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = 0.02 * rng.standard_normal((n, k), dtype=np.float32)
    dy = 1e-6 * rng.standard_normal((m, n), dtype=np.float32)
    if family == "a":
        pass
    elif family == "b":
        # Massive activations: token 0 and 2 more sink tokens, 4 channels, |value| in [1e3, 1e4].
        sinks = np.concatenate(([0], 1 + rng.choice(m - 1, 2, replace=False)))
        chans = rng.choice(k, 4, replace=False)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(3, 4))
        mags = 10.0 ** rng.uniform(3.0, 4.0, size=(3, 4))
        x[np.ix_(sinks, chans)] = (signs * mags).astype(np.float32)
    elif family == "c":
        # Outlier channels of X, each scaled by its own factor in [50, 100].
        chans = rng.choice(k, 6, replace=False)
        x[:, chans] *= rng.uniform(50.0, 100.0, size=6).astype(np.float32)
    elif family == "d":
        # Output channels of W 100x larger.
        rows = rng.choice(n, 4, replace=False)
        w[rows, :] *= np.float32(100.0)
    elif family == "e":
        # The gradient concentrated on 24 tokens: every other row 1e-4 as large.
        keep = rng.choice(m, 24, replace=False)
        others = np.ones(m, dtype=bool)
        others[keep] = False
        dy[others, :] *= np.float32(1e-4)
    elif family == "f":
        # Lognormal magnitudes (sigma 2) with random signs.
        z = rng.standard_normal((m, n), dtype=np.float32)
        u = rng.standard_normal((m, n), dtype=np.float32)
        dy = np.float32(1e-6) * np.sign(z) * np.exp(np.float32(2.0) * u)
        del z, u
    elif family == "g":
        # Heavy-tailed gradient, as make_gemm_capture.py writes.
        dy = np.float32(1e-6) * rng.standard_normal((m, n), dtype=np.float32) ** 3
    else:
        raise ValueError("unknown family %r" % family)
    return x, w, dy


def main():
    ap = argparse.ArgumentParser(description="write BF16 single-layer captures of the issue-54 value families")
    ap.add_argument("out_root")
    ap.add_argument("--families", default=FAMILIES, help="family letters out of %s (default all)" % FAMILIES)
    ap.add_argument("--seeds", type=int, default=6, help="seeds 0..SEEDS-1 per family (default 6)")
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--in", dest="k", type=int, default=4096)
    ap.add_argument("--out", dest="n", type=int, default=4096)
    a = ap.parse_args()
    bad = [f for f in a.families if f not in FAMILIES]
    if bad or not a.families:
        ap.error("--families: letters out of %s, got %r" % (FAMILIES, a.families))
    if a.seeds < 1:
        ap.error("--seeds must be at least 1")
    # The smallest shape every family can be drawn in (e: 24 tokens, c: 6 channels, d: 4 rows).
    if a.tokens < 24 or a.k < 6 or a.n < 4:
        ap.error("need --tokens >= 24, --in >= 6, --out >= 4")
    for family in a.families:
        for seed in range(a.seeds):
            rng = np.random.default_rng(seed * 1000 + ord(family))
            x, w, dy = make_family(family, rng, a.tokens, a.k, a.n)
            tensors = {}
            for role, t in (("activation", x), ("weight", w), ("gradient", dy)):
                tensors[LAYER + "." + role] = ("BF16", t.shape, t.astype(ml_dtypes.bfloat16).view(np.uint16))
            del x, w, dy
            out_dir = os.path.join(a.out_root, "%s-%d" % (family, seed))
            os.makedirs(out_dir, exist_ok=True)
            path = os.path.join(out_dir, "step_000001.safetensors")
            fp8a_safetensors.write_safetensors(path, tensors, {"step": "1"})
            del tensors
            print("wrote %s (family %s, seed %d, X [%d, %d], W [%d, %d], dY [%d, %d], %.1f MB)"
                  % (path, family, seed, a.tokens, a.k, a.n, a.k, a.tokens, a.n, os.path.getsize(path) / 1e6),
                  flush=True)


if __name__ == "__main__":
    main()
