#!/usr/bin/env python3
"""The GEMM stage's work and rate in a `fp8-advisor run` output folder (issue 35's figure):

    python3 bench/gemm_stage_flops.py RUN_DIR [--cores N]

Counts the products the stage computed, from gemms.csv (emulated rows) and summary.json's
timings_s.gemms: per (step, layer, GEMM) one reference product, wgrad's product of the squared
operands (the noise table), and one product per recipe and distinct pair of operand FP8 types (a
format whose types an earlier format has is copied, not computed: fprop's X and W are E4M3 in
both formats, and BF16 has one); each 2 * rows_used * cols_used * k FLOPs (the output's rows and
columns used, of m and n; cols_used is n in runs before it was written). A bf16 row whose
operands are both BF16 (metrics.csv's input_dtype) is not computed: its casts leave the operands
as they are, and the stage takes the reference (gemm_error.cpp, leaves_operands). Prints the
count, TFLOP, the stage's seconds and GFLOP/s per core (--cores, default the machine's), and the
rows used per GEMM kind (bench/peer_torch_gemm.py --shapes-from takes each GEMM's rows and
columns from the run itself).
"""

import argparse
import csv
import json
import os

ROLES = {"fprop": ("activation", "weight"), "dgrad": ("gradient", "weight"), "wgrad": ("gradient", "activation")}
TYPES = {"e4m3": {"activation": "e4m3", "weight": "e4m3", "gradient": "e4m3"},
         "hybrid": {"activation": "e4m3", "weight": "e4m3", "gradient": "e5m2"}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--cores", type=int, default=os.cpu_count())
    a = ap.parse_args()
    with open(os.path.join(a.run, "gemms.csv"), encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["engine"] == "emulated"]
    with open(os.path.join(a.run, "summary.json"), encoding="utf-8") as f:
        seconds = json.load(f)["timings_s"]["gemms"]
    dtype = {}  # (step, layer, role) -> input dtype
    with open(os.path.join(a.run, "metrics.csv"), encoding="utf-8") as f:
        for m in csv.DictReader(f):
            dtype[(m["step"], m["layer"], m["tensor"])] = m["input_dtype"]
    flops_of, computed, rows_used = {}, set(), {}
    for r in rows:
        g = (r["step"], r["layer"], r["gemm"])
        flops_of[g] = 2 * int(r["rows_used"]) * int(r.get("cols_used") or r["n"]) * int(r["k"])
        rows_used.setdefault(r["gemm"], set()).add(int(r["rows_used"]))
        a_role, b_role = ROLES[r["gemm"]]
        if r["recipe"] == "bf16":
            if all(dtype.get((r["step"], r["layer"], role)) == "BF16" for role in (a_role, b_role)):
                continue  # the reference itself
            types = ("bf16",)
        else:
            types = (TYPES[r["format"]][a_role], TYPES[r["format"]][b_role])
        computed.add(g + (r["recipe"], types))
    references = len(flops_of)
    squares = sum(1 for g in flops_of if g[2] == "wgrad")
    flops = sum(flops_of[c[:3]] for c in computed) + sum(flops_of.values())
    flops += sum(v for g, v in flops_of.items() if g[2] == "wgrad")
    print("gemm_stage products=%d (%d recipe GEMMs, %d references, %d noise) tflop=%.3f seconds=%.2f "
          "gflops_per_core=%.1f cores=%d" % (len(computed) + references + squares, len(computed), references,
                                              squares, flops / 1e12, seconds, flops / seconds / a.cores / 1e9, a.cores))
    print("rows_used " + " ".join("%s=%s" % (g, ",".join(map(str, sorted(v)))) for g, v in sorted(rows_used.items())))


if __name__ == "__main__":
    main()
