#!/usr/bin/env python3
"""Peer for the CUDA benchmark: fp8-advisor's per-tensor FP8 metrics in PyTorch eager, the way a
Python debug tool computes them on the GPU.

For K candidates (recipe x FP8 type) on one BF16 tensor: amax (once per tensor, as fp8-advisor's
statistics pass), then per candidate the scale, x * scale clamped to +-fp8_max and cast to
torch.float8_e4m3fn / torch.float8_e5m2 (clamped first: eager casts do not saturate), dequantise,
and mse, cos, underflow, overflow. Elementwise work in float32, sums accumulated in float64
(torch.sum(..., dtype=torch.float64)), as fp8-advisor does.

  python3 bench/peer_torch.py --elements 268435456 --candidates 1,8,32 --device cuda [--repeat 5]

Prints one line per K:
  peer_torch K=.. elements=.. median_s=.. elements_x_candidates_per_s=..
followed by the first candidates' metrics for a sanity comparison with bench_cuda_metrics.

The tensor is N(0,1) with 16 outliers x200 (as bench/make_bench_tensor.py), from torch's own
generator: statistically the same as bench_cuda_metrics' tensor, not the same values.
"""

import argparse
import statistics
import sys
import time

try:
    import torch
except ImportError:  # pragma: no cover
    sys.exit("peer_torch.py needs PyTorch")

FLT_MAX = 3.4028234663852886e38

# Same cycle as tests/peers/peer_numpy.py and bench_cuda_metrics / bench_cpu_metrics.
CANDIDATE_CYCLE = [
    ("current", "e4m3"), ("current:pow2", "e4m3"), ("current:eps=1000", "e4m3"),
    ("current:pow2:eps=1000", "e4m3"),
    ("current", "e5m2"), ("current:pow2", "e5m2"), ("current:eps=1000", "e5m2"),
    ("current:pow2:eps=1000", "e5m2"),
]


def fp8_types():
    return {
        "e4m3": (torch.float8_e4m3fn, 448.0),
        "e5m2": (torch.float8_e5m2, 57344.0),
    }


def parse_recipe(spec):
    fields = spec.split(":")
    assert fields[0] == "current", spec
    pow2, eps = False, 0.0
    for f in fields[1:]:
        if f == "pow2":
            pow2 = True
        elif f.startswith("eps="):
            eps = float(f[4:])
        else:
            raise ValueError("unsupported recipe option " + f)
    return pow2, eps


def make_tensor(n, device, seed=0):
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    x = torch.randn(n, generator=gen, device=device, dtype=torch.float32)
    stride = max(n // 16, 1)
    x[7::stride] *= 200.0
    return x.to(torch.bfloat16)


def scale_from_amax(amax, fp8_max, pow2, eps):
    """Transformer Engine's compute_scale_from_amax on a 0-d float32 tensor."""
    a = torch.clamp(amax, min=eps) if eps > 0 else amax
    bad = (a == 0) | torch.isinf(a) | torch.isnan(a)
    scale = torch.full_like(a, fp8_max) / a
    scale = torch.where(torch.isinf(scale), torch.full_like(scale, FLT_MAX), scale)
    scale = torch.where(bad, torch.ones_like(scale), scale)
    if pow2:  # keep sign and exponent bits
        scale = (scale.view(torch.int32) & -8388608).view(torch.float32)
    return scale


def candidate_metrics(x32, amax, recipe, fmt):
    fp8_dtype, fp8_max = fp8_types()[fmt]
    pow2, eps = parse_recipe(recipe)
    scale = scale_from_amax(amax, fp8_max, pow2, eps)
    scale_inv = 1.0 / scale
    q = torch.clamp(x32 * scale, -fp8_max, fp8_max).to(fp8_dtype)
    q32 = q.to(torch.float32)
    deq = q32 * scale_inv
    err = x32 - deq
    n = x32.numel()
    sum_sq_err = torch.sum(err * err, dtype=torch.float64)
    sum_sq = torch.sum(x32 * x32, dtype=torch.float64)
    sum_x_deq = torch.sum(x32 * deq, dtype=torch.float64)
    sum_deq_sq = torch.sum(deq * deq, dtype=torch.float64)
    mse = sum_sq_err / n
    cos = sum_x_deq / torch.sqrt(sum_sq * sum_deq_sq)
    underflow = ((x32 != 0) & (q32 == 0)).sum()
    overflow = (x32.abs() > fp8_max * scale_inv).sum()
    return torch.stack([scale.double(), mse, cos, 100.0 * underflow.double() / n, 100.0 * overflow.double() / n])


def evaluate(x, candidates):
    """Every candidate on x (BF16): one float32 copy and one amax, then each candidate."""
    x32 = x.to(torch.float32)
    amax = x32.abs().amax()
    return [candidate_metrics(x32, amax, r, f) for r, f in candidates]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--elements", type=int, default=268435456)
    ap.add_argument("--candidates", default="1,8,32")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    x = make_tensor(args.elements, device)
    sync()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print("# torch %s on %s, BF16 tensor of %d elements" % (torch.__version__, name, args.elements), flush=True)
    for k in [int(s) for s in args.candidates.split(",")]:
        cands = [CANDIDATE_CYCLE[i % len(CANDIDATE_CYCLE)] for i in range(k)]
        results = [r.cpu() for r in evaluate(x, cands)]  # warm-up
        times = []
        for _ in range(max(args.repeat, 1)):
            sync()
            t0 = time.perf_counter()
            results = [r.cpu() for r in evaluate(x, cands)]  # .cpu() as a tool logging the values
            sync()
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        print("peer_torch K=%d elements=%d median_s=%.6f elements_x_candidates_per_s=%.4g"
              % (k, args.elements, med, args.elements * k / med), flush=True)
        for (recipe, fmt), r in list(zip(cands, results))[:8]:
            scale, mse, cos, under, over = r.tolist()
            print("  %s,%s scale=%.9g mse=%.17g cos=%.17g underflow_pct=%.17g overflow_pct=%.17g"
                  % (recipe, fmt, scale, mse, cos, under, over))
        del results
        if device.type == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
