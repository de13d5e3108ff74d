#!/usr/bin/env python3
"""Writes a multi-GB BF16 capture for the GPU check's end-to-end timing (scripts/gpu-check.sh).

    python3 make_big_capture.py OUT_DIR LAYERS STEPS

LAYERS layers x STEPS steps, one safetensors file per step (step_NNNNNN.safetensors) with, per
layer, X [8192, 4096], W [4096, 4096] and dY [8192, 4096] in BF16 (160 MiB per layer and step).
Random normal values (W x 0.02, dY = 1e-6 z^3), generated on the GPU when there is one. Written by
the capture hook's safetensors writer (fp8a_capture.py, next to this file in the GPU bundle, or
python/ in the source tree). Needs torch.
"""

import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [here, os.path.join(here, "..", "python")]
import fp8a_capture  # noqa: E402


def main(argv):
    out, layers, steps = argv[1], int(argv[2]), int(argv[3])
    os.makedirs(out, exist_ok=True)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator(device=dev).manual_seed(1)
    total = 0
    for step in range(1, steps + 1):
        tensors = {}
        for layer in range(layers):
            name = "layers.%d.mlp.linear_fc1" % layer
            x = torch.randn(8192, 4096, generator=g, device=dev)
            w = 0.02 * torch.randn(4096, 4096, generator=g, device=dev)
            dy = 1e-6 * torch.randn(8192, 4096, generator=g, device=dev).pow(3)
            for role, t in (("activation", x), ("weight", w), ("gradient", dy)):
                tensors[name + "." + role] = t.to(torch.bfloat16).cpu()
        path = os.path.join(out, "step_%06d.safetensors" % step)
        fp8a_capture.write_safetensors(path, tensors, {"step": str(step)})
        total += os.path.getsize(path)
    print("wrote %s: %d files, %.2f GB" % (out, steps, total / 1e9))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
