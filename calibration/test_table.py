#!/usr/bin/env python3
"""The calibration table's arithmetic (table.py) on numbers it does not produce: the Wilson score
intervals of Newcombe's worked examples, and small hand-built outcome sets whose scores and
unsettled verdicts are counted here by hand. stdlib only; ctest test_calibration_table."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import table  # noqa: E402


class Wilson(unittest.TestCase):
    def test_newcombe_examples(self):
        # R. G. Newcombe, "Two-sided confidence intervals for the single proportion: comparison
        # of seven methods", Statistics in Medicine 17 (1998) 857-872, Table II, method 3 (score).
        for k, n, lo, hi in [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605),
                             (0, 20, 0.0000, 0.1611), (1, 29, 0.0061, 0.1718)]:
            got = table.wilson(k, n)
            self.assertAlmostEqual(got[0], lo, places=4, msg="%d/%d" % (k, n))
            self.assertAlmostEqual(got[1], hi, places=4, msg="%d/%d" % (k, n))

    def test_rate_text(self):
        # 3 of 5: 0.2307-0.8824 by the score formula.
        self.assertEqual(table.rate(3, 5), "3 / 5 (23-88 %)")
        self.assertEqual(table.rate(0, 0), "0 / 0")


def arm(harm, fails, gap=None, se=None, bar=None, n=3):
    a = {"harm": harm, "gap_val": gap, "gap_val_se": se, "practical": bar, "gap_val_n": n}
    if fails is not None:
        a["verdicts"] = {"policy": {"fails": fails, "gemms_to_bf16": 2 if fails else 0}}
    return a


def doc_of(arms_by_case, widths):
    return {"model": {"d_model": 64},
            "cases": {c: {"arms": arms, "model": {"d_model": widths[c]}} for c, arms in arms_by_case.items()}}


class Scores(unittest.TestCase):
    def setUp(self):
        self.doc = doc_of({
            "a": {"bf16": {"harm": "no"},
                  "current": arm("yes", True, 0.10, 0.01, 0.03),    # detection, settled
                  "block": arm("no", True, 0.015, 0.01, 0.03),      # false alarm, 1.5 SE under
                  "plan": arm("no", None, 0.0, 0.01, 0.03)},        # not judged
            "a@d256": {"bf16": {"harm": "no"},
                       "current": arm("no", False, 0.05, 0.02, 0.034),  # pass, 0.8 SE over
                       "block": arm("no", False, -0.05, 0.01, 0.034),   # pass, far under
                       "odd": arm("undetermined", True, 0.01, None, 0.034, n=1)},
        }, {"a": 64, "a@d256": 256})
        self.doc["score"] = table.score(self.doc["cases"], [])

    def test_score(self):
        s = self.doc["score"]["policy"]
        self.assertEqual(s["detections"], ["a/current"])
        self.assertEqual(s["false_alarms"], ["a/block"])
        self.assertEqual(s["passes"], ["a@d256/current", "a@d256/block"])
        self.assertEqual(s["misses"], [])
        self.assertEqual(s["undetermined"], ["a@d256/odd"])

    def test_by_width(self):
        rows = [line for line in table.score_by_width(self.doc) if line.startswith("| policy")]
        # d64: 1 of 1 detected, 1 false alarm in 1 harmless run (interval 21-100 %);
        # d256: no harm, 0 in 2 (0-66 %).
        self.assertEqual(rows, ["| policy | 1 / 1 | 1 / 1 (21-100 %) | 0 / 0 | 0 / 2 (0-66 %) |"])

    def test_unsettled(self):
        lines = table.unsettled(self.doc)
        runs = [line.split(" | ")[0][2:] for line in lines if line.startswith("| a")]
        # |gap - bar| < 2 SE: a/block (0.015 < 0.02) and a@d256/current (0.016 < 0.04); not
        # a/current (0.07), a@d256/block (0.084), the unjudged plan or the single-order arm.
        self.assertEqual(runs, ["a/block", "a@d256/current"])

    def test_nothing_unsettled(self):
        doc = doc_of({"b": {"bf16": {"harm": "no"}, "x": arm("yes", True, 0.5, 0.01, 0.03)}}, {"b": 64})
        self.assertEqual(table.unsettled(doc), [])


if __name__ == "__main__":
    unittest.main()
