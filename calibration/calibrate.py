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
    """Trains the queued runs that have neither a finished folder under runs/ nor an outcome
    stored in results.json under the same configuration hash."""
    queued = cases.queue(only)
    stored = stored_replicates()

    def done(item):
        cfg = cases.arm_config(*item)
        return (harness.config_hash(cfg) in stored
                or os.path.exists(os.path.join(harness.run_dir(cfg), "result.json")))

    todo = [i for i in queued if not done(i)]
    print("%d runs (%d finished or stored)" % (len(todo), len(queued) - len(todo)), flush=True)
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


def stored_replicates():
    """{run hash: replicate record} from calibration/results.json: the outcomes of runs whose
    folders under runs/ (not committed) are gone, so that a rerun trains only what is missing."""
    if not os.path.exists(table.RESULTS_JSON):
        return {}
    with open(table.RESULTS_JSON) as f:
        doc = json.load(f)
    return {r["hash"]: r for c in doc["cases"].values() for a in c["arms"].values()
            for r in a["replicates"]}


MODEL_KEYS = ("steps", "layers", "d_model", "heads", "seq", "micro_batch", "accum", "lr")


def outcomes():
    """Per case and arm: the finished replicates' final val loss and 2nd-half train loss, from
    the run's folder or, where that is gone, from results.json under the same configuration hash."""
    stored = stored_replicates()
    out = {}
    for case, (what, base, arms) in cases.CASES.items():
        rows = {}
        for arm, recipe, fmt, extra in arms:
            reps = []
            for rep in range(cases.replicates(case)):
                cfg = cases.arm_config(case, arm, rep)
                path = os.path.join(harness.run_dir(cfg), "result.json")
                if os.path.exists(path):
                    with open(path) as f:
                        r = json.load(f)
                    reps.append({"rep": rep, "hash": r["hash"], "val": r["final_val_loss"],
                                 "train": r["mean_train_loss_2nd_half"], "finite": r["finite"],
                                 "seconds": r["seconds"]})
                elif harness.config_hash(cfg) in stored:
                    reps.append(dict(stored[harness.config_hash(cfg)], rep=rep))
            rows[arm] = {"recipe": fmt_recipe(recipe, fmt), "fallback": extra.get("fallback", []),
                         "override": extra.get("override", {}), "replicates": reps}
        out[case] = {"what": what, "arms": rows,
                     "model": {k: base[k] for k in MODEL_KEYS
                               if k in base and base[k] != harness.DEFAULTS[k]},
                     "noise_case": cases.NOISE_CASE.get(case, "healthy")}
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
    by_case = {}
    for nc in sorted({c["noise_case"] for c in data.values()}):
        gaps = paired_gaps(data[nc]["arms"]["bf16-split"], data[nc]["arms"]["bf16"], "val")
        by_case[nc] = {"kernel_noise_gaps": gaps, "kernel_noise_rms":
                       math.sqrt(sum(g * g for g in gaps) / len(gaps)) if gaps else math.nan}
    seeds_sd = []
    for case, c in data.items():
        kernel_rms = by_case[c["noise_case"]]["kernel_noise_rms"]
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
    return dict(by_case["healthy"], bf16_seed_sd=seeds_sd, by_case=by_case)


def store_captures(data):
    """Replicate 0's captures of every FP8 arm that trained each GEMM in its recipe into
    calibration/captures/CASE--ARM (committed), replaced where the run's folder is here; the
    stored captures of runs whose folders are gone stay."""
    for case, c in data.items():
        for arm, a in c["arms"].items():
            if (a["recipe"] == "bf16" or a["fallback"] or a["override"] or not a["replicates"]
                    or a["replicates"][0]["rep"] != 0):
                continue
            src = os.path.join(harness.RUNS, a["replicates"][0]["hash"])
            dst = os.path.join(CAPTURES, "%s--%s" % (case, arm))
            if not os.path.isdir(src):
                continue
            if os.path.isdir(dst):
                shutil.rmtree(dst)
            os.makedirs(dst)
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
    store_captures(data)
    runs = [r for c in data.values() for arm in c["arms"].values() for r in arm["replicates"]]
    # Runs stored before per-run seconds were kept count with the part of the stored total that
    # no run's seconds account for (untimed_seconds; older results.json: its total less its timed
    # runs' seconds).
    previous = 0.0
    if any("seconds" not in r for r in runs):
        with open(table.RESULTS_JSON) as f:
            old = json.load(f)
        previous = old.get("untimed_seconds", old["training_seconds"] - sum(
            r.get("seconds", 0.0) for c in old["cases"].values() for arm in c["arms"].values()
            for r in arm["replicates"]))
    doc = {"command": "nice -n 10 CONSUMERS_VENV/bin/python calibration/calibrate.py --binary BINARY",
           "replicates": cases.REPLICATES, "replicates_of": cases.REPLICATES_OF, "runs": len(runs),
           "training_seconds": round(previous + sum(r.get("seconds", 0.0) for r in runs), 1),
           "untimed_seconds": round(previous, 1),
           "model": {k: harness.DEFAULTS[k] for k in MODEL_KEYS},
           "noise": noise, "cases": data}
    table.write(a.binary, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
