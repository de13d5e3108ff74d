#!/usr/bin/env python3
"""Regenerates the calibration table: trains every run of cases.py that is not cached yet
(harness.py, --jobs processes at 1 thread each), then (--table) judges the stored captures with
fp8-advisor and writes calibration/RESULTS.md and calibration/results.json.

  nice -n 10 /work/main/build/consumers-venv/bin/python calibration/calibrate.py \\
      --binary build-cpu/cli/fp8-advisor [--jobs 2] [--train-only]
"""

import argparse
import multiprocessing
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cases  # noqa: E402
import harness  # noqa: E402


def _train_one(item):
    case, arm, rep = item
    t0 = time.time()
    r = harness.train(cases.arm_config(case, arm, rep), log=lambda *a: None)
    return item, r["final_val_loss"], time.time() - t0


def train_all(jobs):
    todo = cases.queue()
    print("%d runs (%d cached)" % (len(todo), sum(os.path.exists(os.path.join(
        harness.run_dir(cases.arm_config(*i)), "result.json")) for i in todo)), flush=True)
    with multiprocessing.get_context("spawn").Pool(jobs, maxtasksperchild=1) as pool:
        for (case, arm, rep), val, dt in pool.imap(_train_one, todo):
            print("%s %s rep %d: final val loss %.4f (%.0f s)" % (case, arm, rep, val, dt),
                  flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--binary", default=None, help="fp8-advisor for the verdicts")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--train-only", action="store_true")
    a = p.parse_args(argv)
    train_all(a.jobs)


if __name__ == "__main__":
    main()
