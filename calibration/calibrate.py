#!/usr/bin/env python3
"""Regenerates the calibration table: trains every run of cases.py that is not cached yet
(harness.py, --jobs processes at 1 thread each, cached under calibration/runs/), stores the
outcomes, the gaps against BF16 and the harm verdicts, copies replicate 0's captures of every FP8
arm to calibration/captures/, and has table.py judge them with fp8-advisor and write
calibration/RESULTS.md and calibration/results.json.

  nice -n 10 build/consumers-venv/bin/python calibration/calibrate.py \\
      --binary build-cpu/cli/fp8-advisor [--jobs 2] [--train-only]
"""

import argparse
import json
import math
import multiprocessing
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cases  # noqa: E402
import harness  # noqa: E402
import table  # noqa: E402

CAPTURES = table.CAPTURES


def _train_one(item):
    case, arm, rep = item
    t0 = time.time()
    r = harness.train(cases.arm_config(case, arm, rep), log=lambda *a: None)
    return item, r["final_val_loss"], time.time() - t0


def train_all(jobs, only=None):
    todo = cases.queue(only)
    print("%d runs (%d cached)" % (len(todo), sum(os.path.exists(os.path.join(
        harness.run_dir(cases.arm_config(*i)), "result.json")) for i in todo)), flush=True)
    with multiprocessing.get_context("spawn").Pool(jobs, maxtasksperchild=1) as pool:
        for (case, arm, rep), val, dt in pool.imap(_train_one, todo):
            print("%s %s rep %d: final val loss %.4f (%.0f s)" % (case, arm, rep, val, dt),
                  flush=True)


# ---- outcomes ---------------------------------------------------------------------------------

def mean_se(v):
    n = len(v)
    if n == 0:
        return math.nan, math.nan
    m = sum(v) / n
    if n < 2:
        return m, math.nan
    return m, math.sqrt(sum((x - m) ** 2 for x in v) / (n - 1) / n)


def outcomes():
    """Per case and arm: the finished replicates' final val loss and 2nd-half train loss."""
    out = {}
    for case, (what, _, arms) in cases.CASES.items():
        rows = {}
        for arm, recipe, fmt, extra in arms:
            reps = []
            for rep in range(cases.REPLICATES):
                cfg = cases.arm_config(case, arm, rep)
                path = os.path.join(harness.run_dir(cfg), "result.json")
                if os.path.exists(path):
                    with open(path) as f:
                        r = json.load(f)
                    reps.append({"rep": rep, "hash": r["hash"], "val": r["final_val_loss"],
                                 "train": r["mean_train_loss_2nd_half"], "finite": r["finite"]})
            rows[arm] = {"recipe": fmt_recipe(recipe, fmt), "fallback": extra.get("fallback", []),
                         "replicates": reps}
        out[case] = {"what": what, "arms": rows}
    return out


def fmt_recipe(recipe, fmt):
    return "bf16" if recipe == "bf16" else "%s/%s" % (recipe, fmt)


def paired_gaps(arm, base, key):
    """arm - base per replicate on the same batches."""
    b = {r["rep"]: r[key] for r in base["replicates"]}
    return [r[key] - b[r["rep"]] for r in arm["replicates"] if r["rep"] in b]


def judge_outcomes(data):
    """Gaps vs BF16 and the harm rule (README): harm when the mean paired gap of the final val
    loss is > 2 SE and > the practical threshold max(1 % of BF16's loss, 2x the kernel noise)."""
    kn = data["healthy"]["arms"]["bf16-split"]
    noise = paired_gaps(kn, data["healthy"]["arms"]["bf16"], "val")
    kernel_rms = math.sqrt(sum(g * g for g in noise) / len(noise)) if noise else math.nan
    seeds_sd = []
    for case, c in data.items():
        vals = [r["val"] for r in c["arms"]["bf16"]["replicates"]]
        m, se = mean_se(vals)
        c["bf16_val_mean"], c["bf16_val_sd"] = m, se * math.sqrt(len(vals)) if len(vals) > 1 else math.nan
        seeds_sd.append(c["bf16_val_sd"])
        for arm, a in c["arms"].items():
            if arm == "bf16":
                continue
            for key in ("val", "train"):
                g = paired_gaps(a, c["arms"]["bf16"], key)
                gm, gse = mean_se(g)
                a["gap_" + key], a["gap_%s_se" % key], a["gap_%s_n" % key] = gm, gse, len(g)
            practical = max(0.01 * m, 2 * kernel_rms if kernel_rms == kernel_rms else 0.0)
            a["practical"] = practical
            n, gm, gse = a["gap_val_n"], a["gap_val"], a["gap_val_se"]
            a["beyond_noise"] = bool(n >= 2 and gm > 2 * gse and gm > 2 * kernel_rms)
            if not all(r["finite"] for r in a["replicates"]) and a["replicates"]:
                a["harm"] = "yes"
            elif n < 2:
                a["harm"] = "undetermined"
            else:
                a["harm"] = "yes" if (a["beyond_noise"] and gm > practical) else "no"
    return {"kernel_noise_gaps": noise, "kernel_noise_rms": kernel_rms,
            "bf16_seed_sd": seeds_sd}


def store_captures(data):
    """Replicate 0's captures of every FP8 arm into calibration/captures/CASE--ARM (committed)."""
    for case, c in data.items():
        for arm, a in c["arms"].items():
            if (a["recipe"] == "bf16" or a["fallback"] or not a["replicates"]
                    or a["replicates"][0]["rep"] != 0):
                continue
            src = os.path.join(harness.RUNS, a["replicates"][0]["hash"])
            dst = os.path.join(CAPTURES, "%s--%s" % (case, arm))
            os.makedirs(dst, exist_ok=True)
            for name in sorted(os.listdir(src)):
                if name.endswith((".safetensors", ".csv")) or name == "config.json":
                    shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--binary", default=None, help="fp8-advisor for the verdicts")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--train-only", action="store_true")
    p.add_argument("--no-train", action="store_true", help="table the finished runs only")
    p.add_argument("--cases", default=None, help="train only these cases (comma-separated)")
    a = p.parse_args(argv)
    t0 = time.time()
    if not a.no_train:
        train_all(a.jobs, a.cases.split(",") if a.cases else None)
    if a.train_only:
        return 0
    if not a.binary:
        sys.exit("--binary is needed for the verdicts")
    data = outcomes()
    noise = judge_outcomes(data)
    if os.path.isdir(CAPTURES):
        shutil.rmtree(CAPTURES)
    store_captures(data)
    runs = [r for c in data.values() for arm in c["arms"].values() for r in arm["replicates"]]
    doc = {"command": "nice -n 10 CONSUMERS_VENV/bin/python calibration/calibrate.py --binary BINARY",
           "replicates": cases.REPLICATES, "runs": len(runs),
           "training_seconds": round(sum(json.load(open(os.path.join(harness.RUNS, r["hash"],
                                                                  "result.json")))["seconds"]
                                         for r in runs), 1),
           "model": {k: harness.DEFAULTS[k] for k in ("steps", "layers", "d_model", "heads",
                                                      "seq", "micro_batch", "accum")},
           "noise": noise, "cases": data}
    table.write(a.binary, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
