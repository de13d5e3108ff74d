#!/usr/bin/env python3
"""Checks that bench/peer_torch.py computes the metrics fp8-advisor computes, so the benchmark
compares the same work: the peer's tensor (make_tensor) is written as a one-step capture (as an
activation, E4M3 under --format hybrid, and as a gradient, E5M2), `fp8-advisor run` evaluates the
peer's candidate recipes on it, and each candidate's scale, mse, cos, underflow and overflow
percentages are compared with the peer's (PyTorch float8 casts after clamping).

  python3 bench/peer_torch_check.py --binary build/cli/fp8-advisor [--device cuda] [--elements N]

Scales (float32) and the percentages must be equal. mse and cos may differ by 1e-7 relative: the
peer forms x - deq, (x - deq)^2 and x * deq in float32 before its float64 sums, fp8-advisor forms
them in float64; with power-of-two scales every term is exact in float32 and they agree to the
float64 rounding of the sums. Exit status 1 on a difference beyond that.
"""

import argparse
import csv
import os
import struct
import subprocess
import sys
import tempfile

# fp8a_capture: next to this file in the GPU bundle, in python/ in the source tree.
here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [here, os.path.join(here, "..", "python")]
import fp8a_capture  # noqa: E402
import peer_torch  # noqa: E402  (needs PyTorch)
import torch  # noqa: E402

RECIPES = sorted({r for r, _ in peer_torch.CANDIDATE_CYCLE})
ROLE_OF_FORMAT = {"e4m3": "activation", "e5m2": "gradient"}  # --format hybrid
REL_TOL = 1e-7


def write_capture(x, path):
    """One safetensors file, step 1, with x (BF16) as both layers.0.fc1.activation and .gradient."""
    fp8a_capture.write_safetensors(path, {"layers.0.fc1." + role: x for role in ("activation", "gradient")},
                                   {"step": "1"})


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", required=True, help="the fp8-advisor executable")
    ap.add_argument("--device", default="cpu", help="where the peer runs (cpu or cuda)")
    ap.add_argument("--elements", type=int, default=1 << 20, help="a multiple of 1024")
    args = ap.parse_args()
    x = peer_torch.make_tensor(args.elements, torch.device(args.device)).reshape(-1, 1024)
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "capture"))
        write_capture(x, os.path.join(tmp, "capture", "step_000001.safetensors"))
        subprocess.run([args.binary, "run", "--capture", os.path.join(tmp, "capture"), "--recipes",
                        ",".join(RECIPES), "--format", "hybrid", "--no-gemms", "--device", "cpu",
                        "--out", os.path.join(tmp, "out")], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(tmp, "out", "metrics.csv"), newline="") as f:
            rows = {(r["recipe"], r["tensor"]): r for r in csv.DictReader(f)}
    bad, worst = 0, 0.0
    for fmt, role in ROLE_OF_FORMAT.items():
        for recipe in RECIPES:
            scale, mse, cos, under, over = peer_torch.evaluate(x, [(recipe, fmt)])[0].tolist()
            r = rows[(recipe, role)]
            rel = max(abs(mse - float(r["mse"])) / mse, abs(cos - float(r["cos"])) / cos)
            same = (f32(scale) == f32(float(r["scale"])) and under == float(r["underflow_pct"])
                    and over == float(r["overflow_pct"]) and rel <= REL_TOL)
            bad += not same
            worst = max(worst, rel)
            print("%-8s %-22s %s scale %.9g underflow_pct %.9g overflow_pct %.9g mse/cos relative "
                  "difference %.2g" % ("ok" if same else "MISMATCH", recipe, fmt, scale, under, over, rel))
    print("peer_torch_check: %d candidates, %d mismatches, largest mse/cos relative difference %.3g"
          % (2 * len(RECIPES), bad, worst))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
