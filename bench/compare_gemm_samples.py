#!/usr/bin/env python3
"""Two runs' GEMM-output errors against each other, in standard errors (issue 35's check of a new
sampling rule): for every gemms.csv row sampled in the second run (rel_fro_err_se not empty), the
difference of the two rel_fro_err over the two runs' standard errors in quadrature (an unsampled
row of the first run has none).

    python3 bench/compare_gemm_samples.py RUN_BEFORE RUN_AFTER

Prints the count, how many lie within 1 and 2, the largest and the RMS, then the rows beyond 2.
Rows are matched by (step, layer, gemm, recipe, format, engine).
"""

import csv
import math
import os
import sys


def rows(run):
    with open(os.path.join(run, "gemms.csv"), encoding="utf-8") as f:
        return {(r["step"], r["layer"], r["gemm"], r["recipe"], r["format"], r["engine"]): r
                for r in csv.DictReader(f)}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    before, after = rows(sys.argv[1]), rows(sys.argv[2])
    z = []
    for key, b in after.items():
        a = before.get(key)
        if a is None or not b["rel_fro_err_se"]:
            continue
        se = math.hypot(float(b["rel_fro_err_se"]), float(a["rel_fro_err_se"] or 0))
        if se > 0:
            z.append(((float(b["rel_fro_err"]) - float(a["rel_fro_err"])) / se, key))
    if not z:
        sys.exit("no sampled rows in common")
    print("%d sampled rows: %d within 1 standard error, %d within 2, largest %.2f, RMS %.2f"
          % (len(z), sum(abs(v) < 1 for v, _ in z), sum(abs(v) < 2 for v, _ in z), max(abs(v) for v, _ in z),
             math.sqrt(sum(v * v for v, _ in z) / len(z))))
    for v, key in sorted(z):
        if abs(v) >= 2:
            print("%.2f %s" % (v, " ".join(key)))


if __name__ == "__main__":
    main()
