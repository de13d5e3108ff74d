#!/usr/bin/env python3
"""Writes a BF16 capture of about SIZE_GB gigabytes over many files, for bench/run_memory_bench.sh.

    python3 make_memory_capture.py OUT_DIR SIZE_GB [STEPS]

Per layer and step X [4096, 2048], W [2048, 2048] and dY [4096, 2048] in BF16 (40 MiB); layers =
round(SIZE_GB * 1e9 / (STEPS * 40 MiB)), STEPS 4 unless given; two layers per file
(step_SSSSSS_part_PPPP.safetensors, __metadata__ step). Each tensor is one of four random-normal
blocks drawn once (X z, W 0.02 z, dY 1e-6 z^3), times one of five factors, cast to BF16 once per
(block, factor) and kept (at most 20 per role, 0.8 GB), so writing the files costs only the
writes; files are written one at a time.
Needs numpy only; written by the Python package's safetensors writer (python/fp8a_safetensors.py).
Prints the file count and total bytes.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fp8a_safetensors  # noqa: E402

SHAPES = {"activation": (4096, 2048), "weight": (2048, 2048), "gradient": (4096, 2048)}
LAYERS_PER_FILE = 2


def to_bf16(a):
    """float32 -> BF16 bits, round to nearest even (values are finite)."""
    u = a.view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def main(argv):
    out, size_gb = argv[1], float(argv[2])
    steps = int(argv[3]) if len(argv) > 3 else 4
    per_layer_step = sum(r * c * 2 for r, c in SHAPES.values())
    layers = max(1, round(size_gb * 1e9 / (steps * per_layer_step)))
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(1)
    base = {}
    for role, shape in SHAPES.items():
        z = [rng.standard_normal(shape, dtype=np.float32) for _ in range(4)]
        if role == "weight":
            z = [0.02 * b for b in z]
        elif role == "gradient":
            z = [1e-6 * b * b * b for b in z]
        base[role] = z
    bits = {}  # (role, block, factor) -> BF16 bits: at most 20 per role, cast once
    files = total = 0
    for step in range(1, steps + 1):
        for part, first in enumerate(range(0, layers, LAYERS_PER_FILE)):
            tensors = {}
            for layer in range(first, min(layers, first + LAYERS_PER_FILE)):
                for role in SHAPES:
                    key = (role, (layer + step) % 4, (layer * 7 + step * 3) % 5)
                    if key not in bits:
                        bits[key] = to_bf16(base[role][key[1]] * np.float32(1.0 + 0.25 * key[2]))
                    tensors["layers.%d.mlp.linear_fc1.%s" % (layer, role)] = ("BF16", bits[key].shape, bits[key])
            path = os.path.join(out, "step_%06d_part_%04d.safetensors" % (step, part))
            fp8a_safetensors.write_safetensors(path, tensors, {"step": str(step)})
            files += 1
            total += os.path.getsize(path)
    print("wrote %s: %d layers x %d steps, %d files, %d bytes (%.2f GB)"
          % (out, layers, steps, files, total, total / 1e9))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
