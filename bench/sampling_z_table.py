#!/usr/bin/env python3
"""Sampled GEMM-output errors against exact ones, per value family, in standard errors (issue 54):
two roots of runs over the same captures (bench/make_sampling_families.py), one with the sampled
default (--gemm-rows auto) and one exact (--gemm-rows 0).

    python3 bench/sampling_z_table.py ROOT_AUTO ROOT_EXACT [--markdown]

For every run directory name in both roots (e.g. b-3; the family is the part before "-") it reads
<root>/<name>/gemms.csv and matches rows by (step, layer, gemm, recipe, format, engine). For every
AUTO row with rel_fro_err_se finite and > 0: z = (auto - exact) / se of rel_fro_err, and its
relative error |auto - exact| / exact (exact > 0). AUTO rows with rel_fro_err_se 0 or empty are
exact rows: their rel_fro_err must equal the exact run's within 1e-9 relative (mismatches listed).
Prints per family: captures, rows, RMS z, max |z|, % within 2 SE, worst relative error, then all.

Then the decisions: <root>/<name>/recipe.json of both runs compared on what a team deploys (the
recipe, the candidate, and every layer's and every GEMM's precision; the measured numbers and the
text quoting them are left out: a sampled estimate differs from the exact one by its sampling
error); each differing capture is named with its first differing paths.
A report: exits 0 whatever it finds, 2 on usage errors.
"""

import argparse
import csv
import json
import math
import os

KEY = ("step", "layer", "gemm", "recipe", "format", "engine")
EXACT_TOL = 1e-9  # relative tolerance of rows both runs compute exactly
MAX_DIFFS = 5  # differing JSON paths printed per capture


def num(s):
    """A float of a csv field, None when empty or not a number."""
    try:
        return float(s) if s not in (None, "") else None
    except ValueError:
        return None


def read_gemms(run):
    """The gemms.csv rows of a run directory by KEY, or None when the file is missing."""
    path = os.path.join(run, "gemms.csv")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8", newline="") as f:
        return {tuple(r.get(c, "") for c in KEY): r for r in csv.DictReader(f)}


def strip(o):
    """The decision of a recipe.json: recipe, candidate, and per layer its precision and its
    GEMMs' (BF16 or FP8)."""
    if not isinstance(o, dict):
        return o
    return {
        "recipe": o.get("recipe"),
        "candidate": o.get("candidate"),
        "layers": [{"layer": l.get("layer"), "precision": l.get("precision"),
                    "gemms": {g: v.get("precision") for g, v in (l.get("gemms") or {}).items()}}
                   for l in o.get("layers") or []],
    }


def short(v):
    s = json.dumps(v)
    return s if len(s) <= 60 else s[:57] + "..."


def same_scalar(a, b):
    """JSON scalars equal: 1 and 1.0 alike, true and 1 not, NaN equal to NaN."""
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def diff(a, b, path="$", out=None):
    """The JSON paths at which a and b differ (at most MAX_DIFFS + 1), each with both values."""
    if out is None:
        out = []
    if len(out) > MAX_DIFFS:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            p = "%s.%s" % (path, k)
            if k not in b:
                out.append("%s: only in auto" % p)
            elif k not in a:
                out.append("%s: only in exact" % p)
            else:
                diff(a[k], b[k], p, out)
            if len(out) > MAX_DIFFS:
                break
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append("%s: %d items in auto, %d in exact" % (path, len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, "%s[%d]" % (path, i), out)
            if len(out) > MAX_DIFFS:
                break
    elif not same_scalar(a, b):
        out.append("%s: auto %s, exact %s" % (path, short(a), short(b)))
    return out


def read_json(path):
    """(object, None) or (None, why not)."""
    if not os.path.isfile(path):
        return None, "missing"
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f), None
    except (OSError, ValueError) as e:
        return None, "unreadable (%s)" % e


def order(name):
    """Sort names by family, then seed as a number (b-10 after b-9)."""
    fam, _, seed = name.partition("-")
    return (fam, int(seed) if seed.isdigit() else math.inf, seed)


class Family:
    """One family's tallies."""

    def __init__(self):
        self.captures = 0
        self.z = []  # z of the sampled rows
        self.worst_rel = None  # largest |auto - exact| / exact of the sampled rows
        self.exact_rows = 0
        self.mismatches = 0

    def add(self, other):
        self.captures += other.captures
        self.z.extend(other.z)
        if other.worst_rel is not None:
            self.worst_rel = max(self.worst_rel or 0.0, other.worst_rel)
        self.exact_rows += other.exact_rows
        self.mismatches += other.mismatches

    def cells(self):
        """captures, rows, RMS z, max |z|, within 2 SE, worst relative error, as strings."""
        n = len(self.z)
        if n == 0:
            return [str(self.captures), "0", "-", "-", "-", "-"]
        rms = math.sqrt(sum(v * v for v in self.z) / n)
        within = 100.0 * sum(abs(v) < 2 for v in self.z) / n
        worst = "-" if self.worst_rel is None else "%.3f %%" % (100.0 * self.worst_rel)
        return [str(self.captures), str(n), "%.2f" % rms, "%.2f" % max(abs(v) for v in self.z),
                "%.1f %%" % within, worst]


def main():
    ap = argparse.ArgumentParser(description="sampled against exact GEMM-output errors per value family (issue 54)")
    ap.add_argument("root_auto")
    ap.add_argument("root_exact")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    a = ap.parse_args()
    for root in (a.root_auto, a.root_exact):
        if not os.path.isdir(root):
            ap.error("%s: not a directory" % root)

    def subdirs(root):
        return {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))}

    auto_names, exact_names = subdirs(a.root_auto), subdirs(a.root_exact)
    names = sorted(auto_names & exact_names, key=order)
    for d in sorted(auto_names ^ exact_names, key=order):
        print("only in %s: %s" % (a.root_auto if d in auto_names else a.root_exact, d))
    if not names:
        print("no run directories in both roots")
        return

    # The GEMM-output errors.
    fams = {}
    notes = []  # mismatching exact rows, unmatched rows, missing files
    for name in names:
        fam = fams.setdefault(name.partition("-")[0], Family())
        try:
            auto = read_gemms(os.path.join(a.root_auto, name))
            exact = read_gemms(os.path.join(a.root_exact, name))
        except (OSError, csv.Error) as e:
            notes.append("%s: gemms.csv unreadable (%s)" % (name, e))
            continue
        if auto is None or exact is None:
            notes.append("%s: gemms.csv missing in %s" % (name, "auto" if auto is None else "exact"))
            continue
        fam.captures += 1
        unmatched = skipped = 0
        for key, ra in auto.items():
            re_ = exact.get(key)
            if re_ is None:
                unmatched += 1
                continue
            va, ve, se = num(ra.get("rel_fro_err")), num(re_.get("rel_fro_err")), num(ra.get("rel_fro_err_se"))
            if va is None or ve is None:
                skipped += 1
            elif (se is None and not ra.get("rel_fro_err_se")) or se == 0:
                # Computed exactly in both runs: must agree.
                fam.exact_rows += 1
                same = va == ve or (math.isnan(va) and math.isnan(ve)) or abs(va - ve) <= EXACT_TOL * abs(ve)
                if not same:
                    fam.mismatches += 1
                    notes.append("%s: exact row differs: %s auto %.10g exact %.10g" % (name, " ".join(key), va, ve))
            elif se is not None and math.isfinite(se) and se > 0:
                fam.z.append((va - ve) / se)
                if ve > 0:
                    fam.worst_rel = max(fam.worst_rel or 0.0, abs(va - ve) / ve)
            else:
                skipped += 1  # rel_fro_err_se negative, not finite or not a number
        if unmatched:
            notes.append("%s: %d auto rows not in the exact run" % (name, unmatched))
        if skipped:
            notes.append("%s: %d rows skipped (rel_fro_err or its se not usable)" % (name, skipped))

    total = Family()
    for f in fams.values():
        total.add(f)
    header = ["family", "captures", "rows", "RMS z", "max abs z", "within 2 SE", "worst error of rel_fro_err"]
    table = [[f] + fams[f].cells() for f in sorted(fams)] + [["all"] + total.cells()]
    if a.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
        for r in table:
            print("| " + " | ".join(r) + " |")
    else:
        widths = [max(len(r[i]) for r in [header] + table) for i in range(len(header))]
        for r in [header] + table:
            print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    print("exact rows (rel_fro_err_se 0 or empty): %d, differing beyond %g relative: %d"
          % (total.exact_rows, EXACT_TOL, total.mismatches))
    for line in notes:
        print(line)

    # The decisions.
    equal = 0
    for name in names:
        ja, why_a = read_json(os.path.join(a.root_auto, name, "recipe.json"))
        je, why_e = read_json(os.path.join(a.root_exact, name, "recipe.json"))
        if why_a or why_e:
            print("decision differs: %s (recipe.json %s)" % (
                name, ", ".join("%s in %s" % (w, r) for w, r in ((why_a, "auto"), (why_e, "exact")) if w)))
            continue
        d = diff(strip(ja), strip(je))
        if not d:
            equal += 1
            continue
        print("decision differs: %s" % name)
        for line in d[:MAX_DIFFS]:
            print("  " + line)
        if len(d) > MAX_DIFFS:
            print("  ...")
    print("decisions equal: %d of %d" % (equal, len(names)))


if __name__ == "__main__":
    main()
