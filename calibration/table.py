#!/usr/bin/env python3
"""The calibration table from stored outcomes and captures (stdlib only: no torch, no training).

  python3 calibration/table.py write BINARY   verdicts of BINARY on calibration/captures/, with
                                              the outcomes in calibration/results.json, written
                                              to results.json and RESULTS.md
  python3 calibration/table.py check BINARY   the same verdicts, compared with results.json's
                                              (ctest test_calibration_verdicts); exit 1 on a change

calibrate.py (training) calls ``write`` after storing the outcomes and captures. Per captured FP8
arm (replicate 0, every GEMM trained in FP8), each enabled criterion of the default policy is run
alone (a policy file enabling only it) and the whole policy too: `fp8-advisor run` with the
arm's amax trace and its recipe, and that candidate's row of recipe.json (gemms_to_bf16 > 0 =
the criterion fails the run).
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CAPTURES = os.path.join(HERE, "captures")
RESULTS_JSON = os.path.join(HERE, "results.json")
RESULTS_MD = os.path.join(HERE, "RESULTS.md")
POLICY = os.path.join(REPO, "policies", "default_policy.json")


# ---- verdicts ---------------------------------------------------------------------------------

def actions_of(policy_path):
    """Each enabled criterion's action in the policy, in the file's order: "fail" or "watch"."""
    with open(policy_path) as f:
        crit = json.load(f)["criteria"]
    return {k: v.get("action", "fail") for k, v in crit.items() if v.get("enabled")}


# Per-GEMM actions (policies/policy.hpp): on a wgrad whose output wgrad_direction judges.
WGRAD_ACTION_KEYS = {"underflow": ("lost_rows_wgrad_action", "its rows rule on wgrads"),
                     "gemm_amplification": ("wgrad_action", "on wgrads")}


def wgrad_actions_of(policy_path):
    """The criteria whose per-GEMM wgrad action is set: {name: "watch its rows rule on wgrads"}."""
    with open(policy_path) as f:
        crit = json.load(f)["criteria"]
    return {name: "%s %s" % (crit[name][key], what) for name, (key, what) in WGRAD_ACTION_KEYS.items()
            if name in crit and crit[name].get(key)}


def criteria_of(policy_path):
    return list(actions_of(policy_path))


def rule_breaches(doc, actions):
    """Issue 23's rule: a criterion with false alarms and no detection only watches; one that
    fails GEMMs in the policy must have a detection. The criteria that break it."""
    return [name for name, s in doc["score"].items()
            if name in actions and actions[name] == "fail" and s["false_alarms"] and not s["detections"]]


# Kinds TE trains on Blackwell only: judged as for a B200 (the default GPU, an H100, excludes them).
BLACKWELL_KINDS = ("mxfp8", "nvfp4")


def advise(binary, cap, recipe, fmt, policy, tmp):
    """`run` on one arm's captures under one policy: that candidate's row of recipe.json."""
    out = tempfile.mkdtemp(dir=tmp)
    gpu = ["--gpu", "b200"] if recipe.split(":")[0] in BLACKWELL_KINDS else []
    subprocess.run([binary, "run", "--capture", cap] + gpu + ["--training-log",
                    os.path.join(cap, "amax_trace_rank0.csv"), "--recipes", recipe + ",bf16",
                    "--format", fmt, "--cost", "none", "--policy", policy, "--threads", "1",
                    "--quiet", "--out", out], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "recipe.json")) as f:
        doc = json.load(f)
    shutil.rmtree(out)
    for c in doc["candidates"]:
        if c["recipe"] == recipe and c["format"] == fmt:
            return c, doc["provenance"]["git_revision"]
    raise RuntimeError("%s: no candidate %s/%s in recipe.json" % (cap, recipe, fmt))


def verdicts(binary, data, policy_path):
    """Every enabled criterion alone (a policy of that criterion only), and the whole policy, on
    every captured FP8 or NVFP4 arm (replicate 0) that trained every GEMM in its recipe."""
    crits = criteria_of(policy_path)
    revision = None
    with tempfile.TemporaryDirectory() as tmp:
        def policy_of(name, enabled):
            p = os.path.join(tmp, "only-%s.json" % name)
            with open(p, "w") as f:
                # Each criterion alone as a failing one, whatever its action in the policy.
                json.dump({"base": "default", "name": "only-" + name,
                           "criteria": {k: {"enabled": k in enabled, "action": "fail"}
                                        for k in crits}}, f)
            return p
        policies = {c: policy_of(c, {c}) for c in crits}
        # The delayed forecast has no check of its own: its predicted clipping is judged by the
        # saturation and rel_mse_floor criteria. Its column is what it adds to those two: the run
        # fails on it when those two with the forecast send more GEMMs to BF16 than without it.
        clip_checks = {"saturation", "rel_mse_floor"} & set(crits)
        if "delayed_forecast" in crits:
            policies["delayed_forecast"] = policy_of("delayed_forecast", clip_checks | {"delayed_forecast"})
            policies["clip_checks"] = policy_of("clip_checks", clip_checks)
        policies["policy"] = policy_path
        for case, c in data.items():
            for arm, a in c["arms"].items():
                cap = os.path.join(CAPTURES, "%s--%s" % (case, arm))
                if not os.path.isdir(cap) or a["fallback"] or a.get("override") or a["recipe"] == "bf16":
                    continue
                recipe, fmt = a["recipe"].rsplit("/", 1)
                a["verdicts"] = {}
                for name, p in policies.items():
                    cand, revision = advise(binary, cap, recipe, fmt, p, tmp)
                    a["verdicts"][name] = {"fails": cand["gemms_to_bf16"] > 0,
                                           "gemms_to_bf16": cand["gemms_to_bf16"],
                                           "fp8_flop_share": cand["fp8_flop_share"],
                                           "worst_failure": cand["worst_failure"]}
                base = a["verdicts"].pop("clip_checks", None)
                if base is not None:
                    v = a["verdicts"]["delayed_forecast"]
                    v["fails"] = v["gemms_to_bf16"] > base["gemms_to_bf16"]
    return crits, revision


def score(data, crits):
    """Per criterion (and the whole policy): the runs it fails with and without harm."""
    out = {}
    for name in crits + ["policy"]:
        s = {"detections": [], "false_alarms": [], "misses": [], "passes": [], "undetermined": []}
        for case, c in data.items():
            for arm, a in c["arms"].items():
                v = a.get("verdicts", {}).get(name)
                if v is None:
                    continue
                run = "%s/%s" % (case, arm)
                if a["harm"] == "yes":
                    s["detections" if v["fails"] else "misses"].append(run)
                elif a["harm"] == "no":
                    s["false_alarms" if v["fails"] else "passes"].append(run)
                else:
                    s["undetermined"].append(run)
        out[name] = s
    return out


def width_of(doc, case):
    """The case's d_model: its own model's, else the default model's."""
    return doc["cases"][case].get("model", {}).get("d_model", doc["model"]["d_model"])


def base_case(case):
    """The case a width variant repeats ("outlier20@d256" -> "outlier20")."""
    return case.split("@")[0]


def across_widths(doc):
    """Each case at every width it ran: per arm the val gap, the harm verdict and the whole
    policy's, side by side (issue 58)."""
    widths = sorted({width_of(doc, c) for c in doc["cases"]})
    bases = []
    for case in doc["cases"]:
        if base_case(case) not in bases:
            bases.append(base_case(case))
    lines = ["## Across widths", "",
             "Each case at every width it has: the val gap ± SE (replicates), the harm verdict, and "
             "the whole policy's (F n: sends n GEMMs to BF16; p: passes; blank: not judged). A case "
             "that has not run at a width is left out of that width's columns.", "",
             "| case | arm | " + " | ".join("d%d gap | d%d harm | d%d policy" % (w, w, w) for w in widths) + " |",
             "|" + " --- |" * (2 + 3 * len(widths))]
    for base in bases:
        variants = [c for c in doc["cases"] if base_case(c) == base]
        if len({width_of(doc, c) for c in variants}) < 2:
            continue
        arms = []
        for c in variants:
            arms += [a for a in doc["cases"][c]["arms"] if a != "bf16" and a not in arms]
        for arm in arms:
            cells = []
            for w in widths:
                a = next((doc["cases"][c]["arms"].get(arm) for c in variants if width_of(doc, c) == w), None)
                if a is None or not a["replicates"]:
                    cells += ["", "", ""]
                    continue
                g, se = a.get("gap_val"), a.get("gap_val_se")
                gap = "-" if g is None or g != g else "%+.4f ± %s (%d)" % (g, num(se), a["gap_val_n"])
                pol = a.get("verdicts", {}).get("policy")
                cells += [gap, a["harm"], ("F %d" % pol["gemms_to_bf16"] if pol["fails"] else "p") if pol else ""]
            lines.append("| %s | %s | %s |" % (base, arm, " | ".join(cells)))
    return lines


def wilson(k, n, z=1.96):
    """The 95 % Wilson score interval of a rate k / n, as (low, high)."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, mid - half), min(1.0, mid + half)


def rate(k, n):
    """"k / n (lo-hi %)": the count with its 95 % interval."""
    if n == 0:
        return "0 / 0"
    lo, hi = wilson(k, n)
    return "%d / %d (%.0f-%.0f %%)" % (k, n, 100 * lo, 100 * hi)


def score_by_width(doc):
    """Per criterion and width: harms detected / harms, false alarms / harmless runs."""
    widths = sorted({width_of(doc, c) for c in doc["cases"]})
    lines = ["## Per criterion at each width", "",
             "Detected / harmful runs, false alarms / harmless runs, among the judged runs of each "
             "width; in brackets the rate's 95 % interval (Wilson score): with 5 harmless runs no "
             "rate between 0 and 1 in 2 can be told apart.", "",
             "| criterion | " + " | ".join("d%d detected | d%d false alarms" % (w, w) for w in widths) + " |",
             "|" + " --- |" * (1 + 2 * len(widths))]
    for name, s in doc["score"].items():
        cells = []
        for w in widths:
            def at_w(runs):
                return [r for r in runs if width_of(doc, r.split("/")[0]) == w]
            det, miss = at_w(s["detections"]), at_w(s["misses"])
            fa, ok = at_w(s["false_alarms"]), at_w(s["passes"])
            cells += ["%d / %d" % (len(det), len(det) + len(miss)), rate(len(fa), len(fa) + len(ok))]
        lines.append("| %s | %s |" % (name, " | ".join(cells)))
    return lines


def unsettled(doc):
    """The judged arms whose harm verdict is within 2 SE of its bar: another batch order or two
    could turn it. Those with the whole policy's verdict beside them."""
    lines = ["## Harm verdicts within 2 SE of their bar", "",
             "Judged arms (FP8 arms without fallbacks, at least 2 batch orders) whose mean gap is "
             "within 2 standard errors of the harm bar, max(1 % of the BF16 loss, 2x the kernel "
             "noise): their harm verdict, and so a detection or a false alarm, is not settled by "
             "the orders run.", "",
             "| run | n | val gap ± SE | bar | harm | policy |", "| --- | --- | --- | --- | --- | --- |"]
    rows = 0
    for case, c in doc["cases"].items():
        for arm, a in c["arms"].items():
            pol = a.get("verdicts", {}).get("policy")
            g, se, bar = a.get("gap_val"), a.get("gap_val_se"), a.get("practical")
            if pol is None or g is None or se is None or bar is None or g != g or se != se:
                continue
            if abs(g - bar) < 2 * se:
                rows += 1
                lines.append("| %s/%s | %d | %+.4f ± %.4f | %.4f | %s | %s |"
                             % (case, arm, a["gap_val_n"], g, se, bar, a["harm"],
                                "F %d" % pol["gemms_to_bf16"] if pol["fails"] else "p"))
    return lines if rows else []


def num(v, fmt="%.4f"):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt % v


def render(doc):
    crits = doc["criteria_judged"]
    lines = ["# Calibration: what FP8 did to training, and what each criterion said", "",
             "Generated by `%s` (%s). Verdicts: `fp8-advisor` at git revision %s, policy "
             "`policies/default_policy.json`. Model, cases and the harm rule: calibration/README.md."
             % (doc["command"], "%d runs, %.0f s of training at 1 thread each (cached); verdicts "
                "%.0f s" % (doc["runs"], doc["training_seconds"], doc["verdict_seconds"]),
                doc["binary_revision"]), "",
             "## Models", "",
             model_text(doc["model"]) + "".join(
                 "; %s: %s" % (case, model_text(c["model"])) for case, c in doc["cases"].items()
                 if c.get("model")), "",
             "Arithmetic: PyTorch on the CPU, one thread. FP8 and NVFP4 arms: the casts emulated bit "
             "for bit (fp8emu.py), their values multiplied in float32 matmuls. BF16 arms: "
             "torch.autocast(bfloat16), whose CPU kernels (oneDNN) use the BF16 units where the CPU "
             "has them (AVX512_BF16; the sessions' machines differ and a run does not record which). "
             "The FP8 arms do not use BF16 units: at these widths the casts, not the matmuls, cost "
             "the time (calibration/README.md), and another matmul would change every cached run's "
             "numbers.", "",
             "## Noise floor", ""]
    for nc, n in sorted(doc["noise"].get("by_case", {"healthy": doc["noise"]}).items()):
        lines.append("- kernel-level perturbation (%s, BF16, the same sequences as 4 micro-batches "
                     "of 1 instead of 2 of 2: other GEMM shapes and summation order), the floor of "
                     "%s: final val loss gaps %s, RMS %s"
                     % (nc, ", ".join(c for c, d in doc["cases"].items()
                                      if d.get("noise_case", "healthy") == nc),
                        ", ".join("%+.2e" % g for g in n["kernel_noise_gaps"]),
                        num(n["kernel_noise_rms"], "%.2e")))
    more = ", ".join("%s %d" % kv for kv in doc.get("replicates_of", {}).items())
    lines += ["- batch-order seeds (BF16, %d replicates per case%s): sd of the final val loss %s"
             % (doc["replicates"], "; " + more if more else "", ", ".join("%s %s" % (c, num(d["bf16_val_sd"]))
                                             for c, d in doc["cases"].items())), "",
             "## Runs", "",
             "Gap = FP8 arm minus its BF16 twin on the same batches, mean over replicates ± its "
             "standard error; `(k SE)` = gap / SE. Verdict columns: F = the criterion alone, "
             "as a failing one, sends at least one GEMM of the run's captures to BF16, p = "
             "passes, blank = not judged (no captures, or the arm trained a GEMM in BF16 or "
             "another recipe); the "
             "policy column is the whole policy with each criterion's action.", "",
             "| case | arm | recipe | n | BF16 val | val gap ± SE | train gap ± SE | harm | "
             + " | ".join(crits) + " | policy: GEMMs to BF16 (FP8 share) |",
             "|" + " --- |" * (9 + len(crits))]
    pending = []  # arms with no finished replicate yet (issue 58's cases train over sessions)
    for case, c in doc["cases"].items():
        for arm, a in c["arms"].items():
            if arm == "bf16":
                continue
            if not a["replicates"]:
                pending.append("%s/%s" % (case, arm))
                continue
            def gap(key):
                g, se = a["gap_" + key], a["gap_%s_se" % key]
                if g is None or (isinstance(g, float) and math.isnan(g)):
                    return "-"
                k = "" if not se or math.isnan(se) else " (%.1f SE)" % (g / se)
                return "%+.4f ± %s%s" % (g, num(se), k)
            v = a.get("verdicts", {})
            cells = [("F" if v[cn]["fails"] else "p") if cn in v else "" for cn in crits]
            pol = v.get("policy")
            pol_cell = "%d (%.0f %%)" % (pol["gemms_to_bf16"], 100 * pol["fp8_flop_share"]) if pol else ""
            recipe = a["recipe"] + ("; BF16: " + ", ".join(a["fallback"]) if a["fallback"] else "")
            recipe += "".join("; %s: %s" % (r, k) for k, r in sorted(a.get("override", {}).items()))
            lines.append("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s |"
                         % (case, arm, recipe, len(a["replicates"]), num(c["bf16_val_mean"]),
                            gap("val"), gap("train"),
                            a["harm"] + (" (beyond noise, under 1 %)" if a["harm"] == "no"
                                         and a.get("beyond_noise") else ""),
                            " | ".join(cells), pol_cell))
    if pending:
        lines += ["", "Not trained yet (%d arms, no finished replicate): %s." % (len(pending), ", ".join(pending))]
    actions = doc.get("actions", {})
    lines += ["", "## Per criterion", "",
              "Action: what the criterion does in the default policy. A criterion with false "
              "alarms and no detection only watches (its breaches are reported, the GEMM stays "
              "FP8); `table.py check` fails when a failing criterion has false alarms and no "
              "detection. Each criterion's columns judge it alone, as a failing one; the policy's "
              "column applies the actions (on a wgrad whose output wgrad_direction judges, the "
              "per-GEMM ones).", "",
              "| criterion | action | detections | false alarms | misses | passes (no harm) |",
              "| --- | --- | --- | --- | --- | --- |"]
    per_gemm = wgrad_actions_of(POLICY)
    for name, s in doc["score"].items():
        action = actions.get(name, "-") + ("; %s" % per_gemm[name] if name in per_gemm else "")
        lines.append("| %s | %s | %d %s | %d %s | %d %s | %d |"
                     % (name, action, len(s["detections"]), fmt_runs(s["detections"]),
                        len(s["false_alarms"]), fmt_runs(s["false_alarms"]),
                        len(s["misses"]), fmt_runs(s["misses"]), len(s["passes"])))
    lines += [""] + score_by_width(doc)
    near = unsettled(doc)
    lines += [""] + near if near else []
    lines += [""] + across_widths(doc)
    lines += ["", "The default policy's record (policies/default_policy.json \"calibration\", which the "
              "answer's `criteria:` line prints): `%s`" % json.dumps(calibration_record(doc))]
    lines += ["", "## The whole policy's first failure per judged run", ""]
    for case, c in doc["cases"].items():
        for arm, a in c["arms"].items():
            pol = a.get("verdicts", {}).get("policy")
            if pol and pol["worst_failure"]:
                lines.append("- %s/%s (harm: %s): %s" % (case, arm, a["harm"], pol["worst_failure"]))
    return "\n".join(lines) + "\n"


def model_text(m):
    return ", ".join("%s %s" % (k, v) for k, v in m.items())


def calibration_record(doc):
    """The whole policy's record, as policies/default_policy.json's "calibration" must carry it
    (policy.hpp PolicyCalibration): judged runs with a harm verdict, their cases, the policy's
    detections and false alarms."""
    s = doc["score"]["policy"]
    judged = s["detections"] + s["misses"] + s["false_alarms"] + s["passes"]
    return {"table": "calibration/RESULTS.md", "cases": len({r.split("/")[0] for r in judged}),
            "runs": len(judged), "harmful": len(s["detections"]) + len(s["misses"]),
            "detected": len(s["detections"]), "false_alarms": len(s["false_alarms"]),
            "widths": sorted({width_of(doc, r.split("/")[0]) for r in judged})}


def policy_record():
    with open(POLICY) as f:
        return json.load(f).get("calibration")


def fmt_runs(runs):
    return "(%s)" % ", ".join(runs) if runs else ""


def strip_verdicts(data):
    for c in data.values():
        for a in c["arms"].values():
            a.pop("verdicts", None)


def write(binary, doc):
    """Verdicts of `binary` on the stored captures into doc; results.json and RESULTS.md."""
    strip_verdicts(doc["cases"])
    t0 = time.time()
    crits, revision = verdicts(binary, doc["cases"], POLICY)
    doc["criteria_judged"], doc["binary_revision"] = crits, revision
    doc["actions"] = actions_of(POLICY)
    doc["score"] = score(doc["cases"], crits)
    doc["verdict_seconds"] = round(time.time() - t0, 1)
    with open(RESULTS_JSON + ".tmp", "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False, allow_nan=True)
        f.write("\n")
    os.replace(RESULTS_JSON + ".tmp", RESULTS_JSON)
    with open(RESULTS_MD, "w") as f:
        f.write(render(doc))
    if policy_record() != calibration_record(doc):
        print("policies/default_policy.json's calibration record %s is not the table's %s: set its "
              "\"calibration\" block (the build embeds the file) and rebuild"
              % (json.dumps(policy_record()), json.dumps(calibration_record(doc))))
    for name in rule_breaches(doc, doc["actions"]):
        print("%s has false alarms and no detection: make it watch only (issue 23's rule)" % name)


def verdict_numbers(data):
    return {(case, arm, name): (v["fails"], v["gemms_to_bf16"])
            for case, c in data.items() for arm, a in c["arms"].items()
            for name, v in a.get("verdicts", {}).items()}


def check(binary):
    with open(RESULTS_JSON) as f:
        doc = json.load(f)
    stored = verdict_numbers(doc["cases"])
    strip_verdicts(doc["cases"])
    verdicts(binary, doc["cases"], POLICY)
    now = verdict_numbers(doc["cases"])
    bad = sorted(k for k in set(stored) | set(now) if stored.get(k) != now.get(k))
    for k in bad:
        print("CHANGED %s/%s %s: stored %s, now %s" % (k[0], k[1], k[2], stored.get(k), now.get(k)))
    doc["score"] = score(doc["cases"], doc["criteria_judged"])
    if policy_record() != calibration_record(doc):
        print("policies/default_policy.json's calibration record %s is not the table's %s"
              % (json.dumps(policy_record()), json.dumps(calibration_record(doc))))
        bad.append(("policy", "calibration", "record"))
    actions = actions_of(POLICY)
    if actions != doc.get("actions"):
        print("the criteria's actions %s are not the table's %s" % (actions, doc.get("actions")))
        bad.append(("policy", "actions", "changed"))
    for name in rule_breaches(doc, actions):
        print("%s fails GEMMs but has false alarms and no detection in the table" % name)
        bad.append(("policy", name, "rule"))
    print("test_calibration_verdicts: %d verdicts, %d changed%s"
          % (len(stored), len(bad), " (regenerate: python3 calibration/table.py write BINARY, "
             "and say why in the commit)" if bad else ""))
    return 1 if bad else 0


def main(argv):
    if len(argv) != 3 or argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    if argv[1] == "check":
        return check(argv[2])
    with open(RESULTS_JSON) as f:
        doc = json.load(f)
    write(argv[2], doc)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
