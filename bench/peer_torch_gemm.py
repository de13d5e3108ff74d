#!/usr/bin/env python3
"""Peer for the GEMM-error benchmark at real model sizes (issue 35): the GEMMs of a
bench/make_llama_capture.py case as PyTorch BF16 matmuls on the CPU (oneDNN), one thread and all
cores in the same run. Needs torch only (Debian's /usr/bin/python3 has torch 1.13 with oneDNN):

    /usr/bin/python3 bench/peer_torch_gemm.py CASE [--tokens M] [--layers L] [--rows R]
        [--wgrad-rows R] [--threads 1,ALL] [--repeat 3] [--quick] [--no-isa] [--dtype float32]

CASE, --tokens and --layers as bench/make_llama_capture.py (7b-layer, 7b-model, 70b-fc1). For each
linear layer (X [M, K], W [N, K], dY [M, N]) its three GEMMs, [m, k] x [k, n], in the operand
layouts of a PyTorch training step (torch.nn.functional.linear and its backward):
    fprop  Y  = X  @ W^T   [M, K] x [K, N]   (W^T a transposed view of W)
    dgrad  dX = dY @ W     [M, N] x [N, K]
    wgrad  dW = dY^T @ X   [N, M] x [M, K]   (dY^T a transposed view of dY)
--rows R replaces M by R in fprop and dgrad (the token rows fp8-advisor samples); --wgrad-rows R
replaces wgrad's N (the dW rows fp8-advisor samples there: engine/gemm_error.cpp); default all.
--shapes-from RUN_DIR takes instead the GEMMs fp8-advisor computed in that run: per (step, layer,
GEMM) of its gemms.csv, an output of rows_used x cols_used (the rows and columns it sampled) over
the whole reduction (k), in the same training layouts.

--dtype float32 times the same GEMMs in float32: on a CPU without BF16 units (AVX2), where
PyTorch's BF16 matmul is not what the CPU can do, float32 is the rate of its FMA units, the
stronger peer for fp8-advisor's products there (widened BF16, float32 kernels).

Operands are N(0, 1) BF16 (or float32) from torch's generator (the speed of a GEMM does not
depend on the values; no subnormals), the output a preallocated tensor of the same type
(torch.matmul(out=)), so no allocation is timed. Each distinct shape is measured once per thread
count, one warm-up and then --repeat timed calls (median); a shape that repeats (7b-model's
layers) is counted with its multiplicity in the totals. --quick: no repeats, the warm-up call is
the one timed (oneDNN creates its primitive in it: a few percent slower on these sizes).

Prints the machine, oneDNN's implementation for a BF16 matmul (a child process run with
DNNL_VERBOSE=1; --no-isa skips it), then per shape and thread count
    <gemm> <layer> m=.. k=.. n=.. threads=T median_s=.. gflops=.. cpu_util=..
(cpu_util: the process's CPU seconds / wall seconds over the timed calls, ~T when the T threads
had their cores to themselves: a lower figure says another process took CPU time), and per thread
count a total line over all the case's GEMMs (with multiplicity):
    total threads=T gemms=.. tflop=.. seconds=.. gflops=.. gflops_per_core=..
gflops = 2 m n k / median seconds / 1e9; gflops_per_core = total gflops / T. The last line has the
load average: the figures hold for an otherwise idle machine only.
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import torch
except ImportError:  # pragma: no cover
    sys.exit("peer_torch_gemm.py needs PyTorch (Debian: /usr/bin/python3)")

import llama_shapes  # noqa: E402
from llama_shapes import CASES  # noqa: E402

ISA_PROBE = r"""
import torch
a = torch.randn(256, 512).bfloat16(); w = torch.randn(384, 512).bfloat16()
torch.matmul(a, w.t())
"""


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return " ".join(x for x in ("avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if x in have)
    except OSError:
        pass
    return ""


def onednn_impl():
    """oneDNN's implementation of a small BF16 matmul ("brg:avx512_core_amx_bf16", ...)."""
    env = dict(os.environ, DNNL_VERBOSE="1", ONEDNN_VERBOSE="1")
    try:
        r = subprocess.run([sys.executable, "-c", ISA_PROBE], env=env, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "unknown (%s)" % e
    impls = sorted({f[4] for f in (line.split(",") for line in r.stdout.splitlines())
                    if len(f) > 5 and f[1] == "exec" and f[3] == "matmul"})
    return ", ".join(impls) if impls else "none seen (not oneDNN?)"


def gemms(case, tokens, layers, rows, wgrad_rows):
    """[(gemm, layer name, m, k, n, count)]: the distinct GEMMs of the case, in order."""
    linears, _, _, _ = CASES[case]
    out = []
    for name, k, n in linears:
        fm = min(rows, tokens) if rows else tokens
        wn = min(wgrad_rows, n) if wgrad_rows else n
        out.append(("fprop", name, fm, k, n, layers))
        out.append(("dgrad", name, fm, n, k, layers))
        out.append(("wgrad", name, wn, tokens, k, layers))
    return out


def gemms_from(run):
    """gemms()'s list from a run's gemms.csv: the sampled output [rows_used, cols_used] of each
    (step, layer, GEMM), over its reduction k."""
    seen, out = set(), []
    with open(os.path.join(run, "gemms.csv"), encoding="utf-8") as f:
        for r in csv.DictReader(f):
            key = (r["step"], r["layer"], r["gemm"])
            if r["engine"] != "emulated" or key in seen:
                continue
            seen.add(key)
            cols = int(r.get("cols_used") or r["n"])
            out.append((r["gemm"], r["layer"], int(r["rows_used"]), int(r["k"]), cols, 1))
    return out


def operands(gemm, m, k, n, gen, dtype=torch.bfloat16):
    """(a, b, out) in the training layouts: fprop X @ W^T, dgrad dY @ W, wgrad dY^T @ X."""
    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float32).to(dtype)
    if gemm == "fprop":    # X [m, k], W [n, k]
        a, b = randn(m, k), randn(n, k).t()
    elif gemm == "dgrad":  # dY [m, k=N], W [k=N, n=K]
        a, b = randn(m, k), randn(k, n)
    else:                  # dY [k=M, m=N] -> dY^T, X [k=M, n=K]
        a, b = randn(k, m).t(), randn(k, n)
    return a, b, torch.empty(m, n, dtype=dtype)


def time_gemm(a, b, c, repeat):
    """(median seconds, process CPU seconds / wall seconds of the timed calls)."""
    c0, t0 = time.process_time(), time.perf_counter()
    torch.matmul(a, b, out=c)  # warm-up: oneDNN primitive creation, first touch of c
    warm, cpu = time.perf_counter() - t0, time.process_time() - c0
    if repeat == 0:
        return warm, cpu / warm
    times = []
    c0 = time.process_time()
    for _ in range(repeat):
        t0 = time.perf_counter()
        torch.matmul(a, b, out=c)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), (time.process_time() - c0) / sum(times)


def main():
    ap = argparse.ArgumentParser(description="PyTorch BF16 matmul peer for the GEMM-error benchmark")
    llama_shapes.add_case_arguments(ap)
    llama_shapes.add_size_arguments(ap)
    ap.add_argument("--rows", type=int, default=0, help="token rows of fprop and dgrad (default all M)")
    ap.add_argument("--wgrad-rows", type=int, default=0, help="dW rows of wgrad (default all N)")
    ap.add_argument("--shapes-from", metavar="RUN_DIR", help="the GEMMs of a run's gemms.csv, as sampled")
    ap.add_argument("--threads", default="1,all", help="comma-separated thread counts, 'all' = the CPUs "
                                                       "this process may use (default 1,all)")
    ap.add_argument("--repeat", type=int, default=3, help="timed calls per shape after the warm-up")
    ap.add_argument("--quick", action="store_true", help="time the warm-up call only (--repeat 0)")
    ap.add_argument("--no-isa", action="store_true", help="skip the oneDNN implementation probe")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16",
                    help="the operands' and output's type (default bfloat16)")
    a = ap.parse_args()
    _, tokens, layers = llama_shapes.case_of(ap, a)
    repeat = 0 if a.quick else a.repeat
    if a.rows < 0 or a.wgrad_rows < 0 or repeat < 0:
        ap.error("--rows, --wgrad-rows and --repeat must be >= 0")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = []
    for t in a.threads.split(","):
        t = cores if t.strip() == "all" else int(t)
        if t < 1:
            ap.error("thread counts must be >= 1")
        if t not in threads:
            threads.append(t)

    print("machine: %s, %d CPUs usable (%s); torch %s, mkldnn %s"
          % (cpu_model(), cores, cpu_flags(), torch.__version__, torch.backends.mkldnn.is_available()))
    if not a.no_isa:
        print("oneDNN BF16 matmul: %s" % onednn_impl())
    shapes = gemms_from(a.shapes_from) if a.shapes_from else gemms(a.case, tokens, layers, a.rows, a.wgrad_rows)
    print("case %s (%s): M=%d, %d layers, rows %s, wgrad rows %s, %d distinct GEMMs (%d in all), %s"
          % (a.case, a.dtype, tokens, layers, a.rows or "all", a.wgrad_rows or "all", len(shapes),
             sum(s[5] for s in shapes), "quick (warm-up call timed)" if repeat == 0
             else "median of %d after a warm-up" % repeat), flush=True)

    gen = torch.Generator().manual_seed(a.seed)
    # Per thread count: total flops and seconds, with multiplicity.
    totals = {t: [0.0, 0.0] for t in threads}
    wall0, load0 = time.perf_counter(), os.getloadavg()
    for gemm, name, m, k, n, count in shapes:
        x, y, out = operands(gemm, m, k, n, gen, getattr(torch, a.dtype))
        flops = 2.0 * m * n * k
        for t in threads:
            torch.set_num_threads(t)
            s, util = time_gemm(x, y, out, repeat)
            totals[t][0] += flops * count
            totals[t][1] += s * count
            print("%s %s m=%d k=%d n=%d threads=%d median_s=%.4f gflops=%.1f cpu_util=%.2f"
                  % (gemm, name, m, k, n, t, s, flops / s / 1e9, util), flush=True)
        del x, y, out
    for t in threads:
        f, s = totals[t]
        print("total threads=%d gemms=%d tflop=%.3f seconds=%.3f gflops=%.1f gflops_per_core=%.1f"
              % (t, sum(sh[5] for sh in shapes), f / 1e12, s, f / s / 1e9, f / s / 1e9 / t))
    print("peer wall %.1f s; load average %.2f %.2f %.2f (at the start: %.2f %.2f %.2f)"
          % ((time.perf_counter() - wall0,) + os.getloadavg() + load0))


if __name__ == "__main__":
    main()
