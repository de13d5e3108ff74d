#!/usr/bin/env python3
"""Peer implementation of fp8-advisor's per-tensor FP8 metrics in numpy + ml_dtypes.

What a Python debug tool would do: load a safetensors capture, quantise each tensor to FP8 with
per-tensor current scaling (Transformer Engine's Float8CurrentScaling) and measure the error.
Used two ways:
  * benchmark (--candidates K[,K...]): time K candidates (recipe x FP8 type) on one tensor;
  * golden data (--all): the metrics of every tensor for a list of recipes, as CSV.

Requires: pip install numpy ml_dtypes

Metric definitions (kept in step with the C++ engine; sums in float64 over finite x):
  amax      = max |x| over non-NaN x (inf included; 0 for an empty or all-NaN tensor)
  eps=V     : if amax < float32(V): amax = float32(V)    (NaN passes through)
  scale     = 1 if amax is 0, inf or NaN; else float32(fp8_max) / float32(amax) in float32,
              inf -> FLT_MAX; pow2: float32 bits & 0xFF800000
  q         = fp8(clamp(float32(x * scale), -fp8_max, fp8_max)), round-to-nearest-even, NaN stays
  scale_inv = float32(1) / scale;  deq = float32(q) * scale_inv  (float32)
  sum_sq_err = sum (x-deq)^2, sum_sq = sum x^2, sum_xd = sum x*deq, sum_dd = sum deq^2
  mse       = sum_sq_err / n_finite                       (NaN when n_finite == 0)
  rel_mse   = sum_sq_err / sum_sq   (0 if both 0, inf if only sum_sq is 0)
  sqnr_db   = -10 log10(rel_mse)    (inf if rel_mse == 0)
  cos       = sum_xd / sqrt(sum_sq * sum_dd)  (1 if both norms 0, 0 if exactly one is)
  underflow_pct = 100 * (nonzero(x) - nonzero(q)) / numel  (NaN counts as nonzero, +-0 as zero)
  overflow_pct  = 100 * count(|x| > float32(fp8_max) * scale_inv) / numel  (inf counts, NaN not)
"""

import argparse
import csv
import io
import json
import math
import statistics
import struct
import sys
import time

import numpy as np

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    sys.exit("peer_numpy.py needs ml_dtypes: pip install numpy ml_dtypes")

FP8 = {
    "e4m3": (ml_dtypes.float8_e4m3fn, 448.0),
    "e5m2": (ml_dtypes.float8_e5m2, 57344.0),
}
FLT_MAX = np.float32(np.finfo(np.float32).max)

CANDIDATE_CYCLE = [
    ("current", "e4m3"), ("current:pow2", "e4m3"), ("current:eps=1000", "e4m3"),
    ("current:pow2:eps=1000", "e4m3"),
    ("current", "e5m2"), ("current:pow2", "e5m2"), ("current:eps=1000", "e5m2"),
    ("current:pow2:eps=1000", "e5m2"),
]

CSV_HEADER = ["step", "layer", "tensor", "recipe", "format", "dtype", "scale", "amax", "mse",
              "rel_mse", "sqnr_db", "cos", "underflow_pct", "overflow_pct"]


# ----------------------------------------------------------------------------------------------
# safetensors reading

def read_safetensors(path):
    """Returns (metadata dict, {name: (dtype string, shape, float32 ndarray)}) in header order."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("%s: too short for a safetensors file" % path)
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError("%s: header length %d past end of file" % (path, n))
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    buf = memoryview(raw)[8 + n:]
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        shape = tuple(info["shape"])
        dtype = info["dtype"]
        chunk = buf[b:e]
        if dtype == "BF16":
            u = np.frombuffer(chunk, dtype="<u2").astype(np.uint32)
            x = (u << 16).view(np.float32)
        elif dtype == "F16":
            x = np.frombuffer(chunk, dtype="<f2").astype(np.float32)
        elif dtype == "F32":
            x = np.frombuffer(chunk, dtype="<f4").astype(np.float32)
        else:
            raise ValueError("%s: tensor %s: unsupported dtype %s" % (path, name, dtype))
        if x.size != math.prod(shape):
            raise ValueError("%s: tensor %s: %d elements for shape %s" % (path, name, x.size, shape))
        tensors[name] = (dtype, shape, x.reshape(shape))
    return meta, tensors


# ----------------------------------------------------------------------------------------------
# recipes and metrics

def parse_recipe(spec):
    fields = spec.split(":")
    if fields[0] != "current":
        raise ValueError("unknown recipe kind %r in %r" % (fields[0], spec))
    pow2, eps = False, 0.0
    for f in fields[1:]:
        if f == "pow2":
            pow2 = True
        elif f.startswith("eps="):
            eps = float(f[4:])
        else:
            raise ValueError("unknown recipe option %r in %r" % (f, spec))
    return pow2, np.float32(eps)


def raw_amax(x):
    """max |x| over non-NaN elements as float32; 0 when there is none."""
    a = np.abs(x.ravel())
    a = a[~np.isnan(a)] if np.isnan(a).any() else a
    return np.float32(a.max()) if a.size else np.float32(0.0)


def compute_scale(amax, fp8_max, pow2, eps):
    amax = np.float32(amax)
    if amax < eps:  # NaN compares false and passes through
        amax = np.float32(eps)
    if amax == 0 or np.isnan(amax) or np.isinf(amax):
        return np.float32(1.0)
    with np.errstate(over="ignore", divide="ignore"):
        scale = np.float32(fp8_max) / amax
    if np.isinf(scale):
        scale = FLT_MAX
    if pow2:
        scale = np.array([scale], dtype=np.float32).view(np.uint32)[0] & np.uint32(0xFF800000)
        scale = np.array([scale], dtype=np.uint32).view(np.float32)[0]
    return np.float32(scale)


def evaluate(x, recipe_spec, fmt):
    """Metrics of one candidate on float32 array x. Returns a dict of Python floats."""
    pow2, eps = parse_recipe(recipe_spec)
    fp8_type, fp8_max_f = FP8[fmt]
    fp8_max = np.float32(fp8_max_f)
    x = x.ravel()
    numel = x.size

    amax = raw_amax(x)
    scale = compute_scale(amax, fp8_max, pow2, eps)
    scale_inv = np.float32(1.0) / scale

    with np.errstate(over="ignore", invalid="ignore"):
        y = x * scale  # float32 product
        np.clip(y, -fp8_max, fp8_max, out=y)  # saturate; NaN stays NaN
        q = y.astype(fp8_type)
        qf = q.astype(np.float32)
        deq = qf * scale_inv

        finite = np.isfinite(x)
        all_finite = bool(finite.all())
        xf = (x if all_finite else x[finite]).astype(np.float64)
        df = (deq if all_finite else deq[finite]).astype(np.float64)
        n_finite = xf.size
        diff = xf - df
        sum_sq_err = float(np.sum(diff * diff))
        sum_sq = float(np.sum(xf * xf))
        sum_xd = float(np.sum(xf * df))
        sum_dd = float(np.sum(df * df))

        underflow = int(np.count_nonzero(x)) - int(np.count_nonzero(qf))
        threshold = fp8_max * scale_inv  # float32 product
        overflow = int(np.count_nonzero(np.abs(x) > threshold))

    mse = sum_sq_err / n_finite if n_finite else math.nan
    if sum_sq > 0:
        rel_mse = sum_sq_err / sum_sq
    else:
        rel_mse = math.inf if sum_sq_err > 0 else 0.0
    sqnr_db = -10.0 * math.log10(rel_mse) if rel_mse > 0 else math.inf
    if sum_sq > 0 and sum_dd > 0:
        cos = sum_xd / math.sqrt(sum_sq * sum_dd)
    else:
        cos = 1.0 if (sum_sq == 0 and sum_dd == 0) else 0.0
    underflow_pct = 100 * underflow / numel if numel else 0.0
    overflow_pct = 100 * overflow / numel if numel else 0.0
    return {
        "scale": float(scale), "amax": float(amax), "mse": float(mse), "rel_mse": float(rel_mse),
        "sqnr_db": float(sqnr_db), "cos": float(cos), "underflow_pct": float(underflow_pct),
        "overflow_pct": float(overflow_pct),
    }


def split_name(name):
    layer, _, role = name.rpartition(".")
    return layer, role


def fmt_num(v):
    return repr(float(v))


def csv_row(step, name, recipe, fmt, dtype, m):
    layer, role = split_name(name)
    return [str(step), layer, role, recipe, fmt, dtype] + [
        fmt_num(m[k]) for k in ("scale", "amax", "mse", "rel_mse", "sqnr_db", "cos",
                                "underflow_pct", "overflow_pct")]


def write_csv(rows, out):
    text = io.StringIO()
    w = csv.writer(text, lineterminator="\n")
    w.writerow(CSV_HEADER)
    w.writerows(rows)
    if out in (None, "-"):
        sys.stdout.write(text.getvalue())
    else:
        with open(out, "w", encoding="utf-8", newline="") as f:
            f.write(text.getvalue())


# ----------------------------------------------------------------------------------------------
# modes

def step_of(meta):
    try:
        return int(meta.get("step", "0"))
    except ValueError:
        return 0


def role_dtype(role, training_format):
    if training_format == "hybrid" and role == "gradient":
        return "e5m2"
    return "e4m3"


def run_all(files, training_format, recipes, out):
    loaded = [read_safetensors(p) for p in files]
    loaded.sort(key=lambda mt: step_of(mt[0]))  # stable: rows by step, then tensor name
    rows = []
    for meta, tensors in loaded:
        step = step_of(meta)
        for name in sorted(tensors):
            _, _, x = tensors[name]
            dtype = role_dtype(split_name(name)[1], training_format)
            for r in recipes:
                rows.append(csv_row(step, name, r, training_format, dtype, evaluate(x, r, dtype)))
    write_csv(rows, out)


def run_candidates(path, tensor, ks, repeat, out):
    meta, tensors = read_safetensors(path)
    if tensor is None:
        tensor = sorted(tensors)[0]
    if tensor not in tensors:
        sys.exit("no tensor %r in %s" % (tensor, path))
    _, _, x = tensors[tensor]
    x = np.ascontiguousarray(x)
    step = step_of(meta)
    all_rows = []
    for k in ks:
        cands = [CANDIDATE_CYCLE[i % len(CANDIDATE_CYCLE)] for i in range(k)]
        times = []
        results = None
        for _ in range(repeat):
            t0 = time.perf_counter()
            results = [evaluate(x, r, f) for r, f in cands]
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        print("peer_numpy K=%d elements=%d median_s=%.6f elements_x_candidates_per_s=%.6g"
              % (k, x.size, med, x.size * k / med if med > 0 else math.inf), flush=True)
        rows = [csv_row(step, tensor, r, f, f, m) for (r, f), m in zip(cands, results)]
        all_rows.extend(rows)
        if out is None:
            write_csv(rows, "-")
    if out is not None:
        write_csv(all_rows, out)


def main(argv=None):
    ap = argparse.ArgumentParser(description="numpy/ml_dtypes peer of fp8-advisor's metrics")
    ap.add_argument("files", nargs="+", metavar="FILE.safetensors")
    ap.add_argument("--tensor", help="tensor for --candidates (default: first name in sort order)")
    ap.add_argument("--candidates", default="8",
                    help="comma-separated list of candidate counts K (default 8)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per K (median reported)")
    ap.add_argument("--csv", dest="csv_out", help="write CSV rows here instead of stdout")
    ap.add_argument("--all", action="store_true", help="golden mode: every tensor of every file")
    ap.add_argument("--format", default="e4m3", choices=["e4m3", "hybrid"])
    ap.add_argument("--recipes", default="current,current:pow2")
    args = ap.parse_args(argv)

    if args.all:
        recipes = [r for r in args.recipes.split(",")]
        for r in recipes:
            parse_recipe(r)
        run_all(args.files, args.format, recipes, args.csv_out or "-")
    else:
        if len(args.files) != 1:
            ap.error("--candidates mode takes one file")
        ks = [int(k) for k in args.candidates.split(",")]
        run_candidates(args.files[0], args.tensor, ks, max(1, args.repeat), args.csv_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
