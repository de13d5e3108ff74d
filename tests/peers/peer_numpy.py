#!/usr/bin/env python3
"""Peer implementation of fp8-advisor's FP8 metrics in numpy + ml_dtypes.

What a Python debug tool would do: load a safetensors capture, quantise each tensor to FP8 with a
Transformer Engine recipe and measure the error. Used two ways:
  * benchmark (--candidates K[,K...]): time K candidates (per-tensor current scaling x FP8 type)
    on one tensor;
  * golden data (--all): the metrics of every tensor for a list of recipes, as CSV, and with
    --gemms the fprop/dgrad/wgrad output error of every layer and recipe.
Written from the TE / OCP definitions (TE's recipe and quantizer sources, the OCP OFP8 and MX
specifications, as METRICS.md cites each), not from the C++.

Requires: pip install numpy ml_dtypes

Recipes (--all; x is the float32 tensor, its 2-D view is [prod(leading dims), last dim]):
  current[:pow2][:eps=V]  one scale per tensor from its own amax (TE Float8CurrentScaling)
  delayed[:history=H][:algo=max|most_recent][:margin=M]  (defaults 1024, max, 0; TE DelayedScaling)
            scale at step t from the amaxes of steps [max(0,t-H), t-1] (max) or of step t-1
            (most_recent), read from --amax-trace plus the captured tensors' own amaxes:
            float32(fp8_max * 2^-M) / amax in float32, +inf -> FLT_MAX; reduced amax 0, inf or
            NaN -> the scale of step t-1 (recursively), step 0 -> 1. A row is written only when
            every step of the windows needed is known (exact replay).
  block[:fp32]  TE Float8BlockScaling: activation and gradient 1x128 blocks (rowwise) and 128x1
            (columnwise), weight 128x128 tiles (rowwise only); edge blocks are partial. Per block:
            amax over non-NaN |x|; scale as current scaling (eps 0) but +inf -> the input dtype's
            max finite (BF16 0x7F7F); power-of-two scales unless :fp32.
  mxfp8[:floor]  32-element blocks along the last dim (rowwise) and the first (columnwise), every
            role. E8M0 code e, scale 2^(127-e), scale_inv 2^(e-127), e = 255 -> NaN.
            TE rule: y = amax * float32(1/fp8_max) in float32; e = biased exponent of y rounded up
            to a power of two; y 0 or <= 2^-127 -> 0; at most 254; inf -> 254; NaN -> 255.
            :floor (OCP MX): e = floor(log2 amax) - emax + 127 (emax 8 E4M3, 15 E5M2), at least 0,
            above 254 -> 255; amax 0 -> 0; inf or NaN amax -> 255.
  bf16      deq = x rounded to bfloat16 (nearest even); saturated = overflow = finite x that
            rounds to inf; scale_inv 1; dtype column "bf16".
Output: blocked and bf16 rows have an empty scale column; orientation rowwise, plus a columnwise
row for 1-D blocks (block activation/gradient, mxfp8).

Metric definitions (kept in step with the C++ engine; sums in float64 over finite x):
  amax      = max |x| over non-NaN x (inf included; 0 for an empty or all-NaN tensor)
  eps=V     : if amax < float32(V): amax = float32(V)    (NaN passes through)
  scale     = 1 if amax is 0, inf or NaN; else float32(fp8_max) / float32(amax) in float32,
              inf -> FLT_MAX; pow2: float32 bits & 0xFF800000
  q         = fp8(clamp(float32(x * scale), -fp8_max, fp8_max)), round-to-nearest-even, NaN stays
  scale_inv = float32(1) / scale;  deq = float32(q) * scale_inv  (float32)
              (blocked recipes: scale and scale_inv of the element's block)
  sum_sq_err = sum (x-deq)^2, sum_sq = sum x^2, sum_xd = sum x*deq, sum_dd = sum deq^2
  mse       = sum_sq_err / n_finite                       (NaN when n_finite == 0)
  rel_mse   = sum_sq_err / sum_sq   (0 if both 0, inf if only sum_sq is 0)
  sqnr_db   = -10 log10(rel_mse)    (inf if rel_mse == 0)
  cos       = sum_xd / sqrt(sum_sq * sum_dd)  (1 if both norms 0, 0 if exactly one is)
  underflow_pct = 100 * #(x != 0 and q == 0) / numel  (NaN counts as nonzero, +-0 as zero)
  underflow_energy_pct = 100 * sum x^2 over finite x with x != 0 and q == 0 / sum_sq
              (0 if sum_sq is 0)
  overflow_pct  = 100 * count(|x| > float32(fp8_max * scale_inv)) / numel  (inf counts, NaN not)
  saturated_count = #(|float32(x * scale)| > 464) for E4M3, >= 61440 for E5M2 (inf counts)
  scale_inv_min, scale_inv_max = over the tensor's blocks (NaN block scales left out); per-tensor:
              scale_inv; bf16: 1

GEMM error (--gemms; per (step, layer) with X = activation [M,K], W = weight [N,K], dY = gradient
[M,N], non-finite elements set to 0 first): fprop X W^T (X rowwise, W rowwise), dgrad dY W (dY
rowwise, W columnwise), wgrad dY^T X (dY columnwise, X columnwise); operands quantised whole
(per-tensor recipes with the tensor's metric scale) and dequantised exactly (per-tensor: the FP8
value / scale in float64, as an FP8 GEMM scales its sums of exact FP8 products; blocked and bf16:
deq), multiplied in float64; reference in float64 of the unquantised operands.
  rel_fro_err = ||Yq - Y||_F / ||Y||_F,  cos = <Yq, Y> / (||Yq||_F ||Y||_F)   (float64)
  over the E = m*n entries of the output:
  zeroed_pct     = 100 * #(Y != 0 and Yq == 0) / E
  sign_flip_pct  = 100 * #(Y != 0, Yq != 0, sign(Yq) != sign(Y)) / E
  median_rel_err = np.median(|Yq - Y| / |Y| over Y != 0)   (0 if no Y is nonzero)
  noise_sign_flip_pct (wgrad only; empty for fprop, dgrad) = 100 * sum over Y != 0 of
                   erfc(|Y| / sqrt(2 c S)) / 2 / E, where S is the same GEMM of the squared
                   operands (float64; what per-element rounding of the operands puts into each
                   entry) and c = ||Yq - Y||_F^2 / sum S: the signs independent rounding noise of
                   the measured size would flip (0 if sum S = 0)
  m, n = output dims, k = reduction dim. fp8-advisor accumulates both GEMMs in float32 (oneDNN):
  compare with a tolerance.
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
    write_rows(CSV_HEADER, rows, out)


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


# ----------------------------------------------------------------------------------------------
# every recipe kind (--all mode)
#
# Written from the Transformer Engine / OCP definitions (see the module docstring), vectorised over
# whole tensors and blocks; independent of the C++ engine's code.

ALL_HEADER = CSV_HEADER + ["orientation", "saturated_count", "scale_inv_min", "scale_inv_max",
                           "underflow_energy_pct"]
GEMM_HEADER = ["step", "layer", "gemm", "recipe", "format", "rel_fro_err", "cos", "m", "n", "k",
               "zeroed_pct", "sign_flip_pct", "median_rel_err", "noise_sign_flip_pct"]

# |x * scale| beyond the last rounding boundary past max finite: E4M3 > 464 (a tie at 464 rounds to
# even, 448), E5M2 >= 61440 (the tie would round to inf).
def saturated_mask(y, dtype):
    a = np.abs(y)
    return a > np.float32(464.0) if dtype == "e4m3" else a >= np.float32(61440.0)


# Largest finite value of the captured tensor's dtype (TE's value_for_inf for block scales).
INPUT_MAX = {
    "BF16": np.array([0x7F7F0000], dtype=np.uint32).view(np.float32)[0],  # 3.3895314e38
    "F16": np.float32(65504.0),
    "F32": FLT_MAX,
}
E8M0_EMAX = {"e4m3": 8, "e5m2": 15}  # OCP MX: exponent of the element type's largest binade


class Recipe:
    """One parsed --recipes entry. spec is the canonical spec string written to the CSV."""

    def __init__(self, spec):
        fields = spec.split(":")
        self.kind = fields[0]
        opts = fields[1:]
        self.pow2, self.eps = False, np.float32(0.0)
        self.history, self.algo, self.margin = 1024, "max", 0
        self.floor = False
        self.spec = spec
        if self.kind == "current":
            self.pow2, self.eps = parse_recipe(spec)
        elif self.kind == "delayed":
            for f in opts:
                key, eq, val = f.partition("=")
                if key == "history" and eq:
                    self.history = int(val)
                    if not 1 <= self.history <= 1 << 24:
                        raise ValueError("history out of range in %r" % spec)
                elif key == "algo" and val in ("max", "most_recent"):
                    self.algo = val
                elif key == "margin" and eq:
                    self.margin = int(val)
                    if not 0 <= self.margin <= 64:
                        raise ValueError("margin out of range in %r" % spec)
                else:
                    raise ValueError("unknown recipe option %r in %r" % (f, spec))
            self.spec = "delayed:history=%d:algo=%s:margin=%d" % (self.history, self.algo,
                                                                  self.margin)
        elif self.kind == "block":
            self.pow2 = True  # TE Float8BlockScaling default: power-of-two scales
            for f in opts:
                if f != "fp32":
                    raise ValueError("unknown recipe option %r in %r" % (f, spec))
                self.pow2 = False
            self.spec = "block" if self.pow2 else "block:fp32"
        elif self.kind == "mxfp8":
            for f in opts:
                if f != "floor":
                    raise ValueError("unknown recipe option %r in %r" % (f, spec))
                self.floor = True
            self.spec = "mxfp8:floor" if self.floor else "mxfp8"
        elif self.kind == "bf16":
            if opts:
                raise ValueError("bf16 takes no options: %r" % spec)
        else:
            raise ValueError("unknown recipe kind %r in %r" % (self.kind, spec))

    @property
    def per_tensor(self):
        return self.kind in ("current", "delayed")

    def orientations(self, role):
        """Both copies where they differ (1-D blocks); rowwise only where the numbers are the
        same (per-tensor scales, bf16, 128x128 weight tiles)."""
        if self.kind == "mxfp8" or (self.kind == "block" and role != "weight"):
            return ("rowwise", "columnwise")
        return ("rowwise",)

    def block(self, role, orientation):
        """(rows, cols) of a block in the 2-D view."""
        if self.kind == "block":
            if role == "weight":
                return (128, 128)
            return (1, 128) if orientation == "rowwise" else (128, 1)
        if self.kind == "mxfp8":
            return (1, 32) if orientation == "rowwise" else (32, 1)
        raise ValueError("no blocks for %s" % self.spec)


def view_2d(x):
    """[d0, ..., dn] -> [d0*...*d(n-1), dn] (TE's 2-D view of a GEMM operand)."""
    if x.ndim == 0:
        return x.reshape(1, 1)
    if x.ndim == 1:
        return x.reshape(1, -1)
    return x.reshape(-1, x.shape[-1])


def block_amax(x2, br, bc):
    """Per-block max |x| over non-NaN elements; edge blocks are partial (padding with 0 does not
    change a max of magnitudes). Returns float32 [ceil(R/br), ceil(C/bc)]."""
    r, c = x2.shape
    rb, cb = -(-r // br), -(-c // bc)
    a = np.zeros((rb * br, cb * bc), dtype=np.float32)
    a[:r, :c] = np.abs(x2)
    a[np.isnan(a)] = 0.0
    return a.reshape(rb, br, cb, bc).max(axis=(1, 3))


def expand_blocks(v, br, bc, shape):
    return np.repeat(np.repeat(v, br, axis=0), bc, axis=1)[:shape[0], :shape[1]]


def scales_from_amax(amax, fp8_max, pow2, value_for_inf):
    """Vectorised TE compute_scale_from_amax (eps 0): fp8_max / amax in float32; amax 0, inf or
    NaN -> 1; +inf -> value_for_inf; pow2 keeps sign and exponent bits."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        scale = np.float32(fp8_max) / amax
    scale = np.where((amax == 0) | ~np.isfinite(amax), np.float32(1.0), scale).astype(np.float32)
    scale[np.isposinf(scale)] = value_for_inf
    if pow2:
        scale = (scale.view(np.uint32) & np.uint32(0xFF800000)).view(np.float32)
    return scale


def e8m0_te(amax, fp8_max):
    """TE MXFP8: e = biased exponent of y = amax * float32(1/fp8_max), rounded up to a power of
    two; y 0 or <= 2^-127 -> 0; at most 254; inf -> 254; NaN -> 255."""
    rcp = np.float32(1.0) / np.float32(fp8_max)
    with np.errstate(over="ignore", invalid="ignore"):
        y = (amax * rcp).astype(np.float32)
    y64 = y.astype(np.float64)
    mant, ex = np.frexp(y64)  # y = mant * 2^ex, mant in [0.5, 1): ceil(log2 y) = ex or ex-1
    ceil_log2 = np.where(mant == 0.5, ex - 1, ex)
    e = np.clip(ceil_log2 + 127, 0, 254)
    e = np.where(y64 == 0, 0, e)
    e = np.where(np.isinf(y64), 254, e)
    e = np.where(np.isnan(y64), 255, e)
    return e.astype(np.int64)


def e8m0_ocp(amax, dtype):
    """OCP MX (microxcaling _quantize_mx): e = floor(log2 amax) - emax + 127, at least 0; above
    254 -> 255 (NaN); amax 0 -> 0; inf or NaN amax -> 255."""
    a64 = amax.astype(np.float64)
    mant, ex = np.frexp(a64)  # floor(log2 a) = ex - 1 for finite a > 0
    e = np.maximum(ex - 1 - E8M0_EMAX[dtype] + 127, 0)
    e = np.where(e > 254, 255, e)
    e = np.where(a64 == 0, 0, e)
    e = np.where(~np.isfinite(a64), 255, e)
    return e.astype(np.int64)


def e8m0_pair(e):
    """(scale, scale_inv) = (2^(127-e), 2^(e-127)) in float32; e == 255 -> NaN."""
    one = np.ones(e.shape, dtype=np.float32)
    scale = np.ldexp(one, (127 - e).astype(np.int32)).astype(np.float32)
    scale_inv = np.ldexp(one, (e - 127).astype(np.int32)).astype(np.float32)
    scale[e == 255] = np.nan
    scale_inv[e == 255] = np.nan
    return scale, scale_inv


class Quantized:
    __slots__ = ("code", "deq", "saturated", "overflow", "sinv_min", "sinv_max", "scale")


def fake_quantize(x2, recipe, dtype, role, orientation, scale, input_dtype):
    """Quantise the 2-D float32 array x2 and dequantise it. scale: the per-tensor scale (current,
    delayed); ignored otherwise. dtype: 'e4m3' / 'e5m2' (ignored for bf16)."""
    out = Quantized()
    with np.errstate(over="ignore", invalid="ignore"):
        if recipe.kind == "bf16":
            b = x2.astype(ml_dtypes.bfloat16).astype(np.float32)  # round to nearest even
            out.code = out.deq = b
            n = int(np.count_nonzero(np.isfinite(x2) & np.isinf(b)))
            out.saturated = out.overflow = n
            out.sinv_min = out.sinv_max = np.float32(1.0)
            out.scale = None
            return out
        fp8_type, fp8_max_f = FP8[dtype]
        fp8_max = np.float32(fp8_max_f)
        if recipe.per_tensor:
            sc = np.float32(scale)
            si = np.float32(1.0) / sc
            thr = fp8_max * si
            out.sinv_min = out.sinv_max = si
            out.scale = sc
        else:
            br, bc = recipe.block(role, orientation)
            amax = block_amax(x2, br, bc)
            if recipe.kind == "block":
                s_blk = scales_from_amax(amax, fp8_max, recipe.pow2, INPUT_MAX[input_dtype])
                si_blk = (np.float32(1.0) / s_blk).astype(np.float32)
            else:
                e = e8m0_ocp(amax, dtype) if recipe.floor else e8m0_te(amax, fp8_max)
                s_blk, si_blk = e8m0_pair(e)
            thr_blk = (fp8_max * si_blk).astype(np.float32)
            sc = expand_blocks(s_blk, br, bc, x2.shape)
            si = expand_blocks(si_blk, br, bc, x2.shape)
            thr = expand_blocks(thr_blk, br, bc, x2.shape)
            # TE's scale_inv_min/max; a NaN block scale (OCP rule, e = 255) is left out.
            valid = si_blk[~np.isnan(si_blk)]
            out.sinv_min = np.float32(valid.min()) if valid.size else np.float32(np.nan)
            out.sinv_max = np.float32(valid.max()) if valid.size else np.float32(np.nan)
            out.scale = None
        y = (x2 * sc).astype(np.float32)
        out.saturated = int(np.count_nonzero(saturated_mask(y, dtype)))
        np.clip(y, -fp8_max, fp8_max, out=y)
        out.code = y.astype(fp8_type).astype(np.float32)
        out.deq = (out.code * si).astype(np.float32)
        out.overflow = int(np.count_nonzero(np.abs(x2) > thr))
    return out


def error_metrics(x, q):
    """Metrics of a Quantized q of the float32 array x (any shape), as in the module docstring."""
    x = x.ravel()
    code = q.code.ravel()
    deq = q.deq.ravel()
    numel = x.size
    finite = np.isfinite(x)
    all_finite = bool(finite.all())
    xf = (x if all_finite else x[finite]).astype(np.float64)
    df = (deq if all_finite else deq[finite]).astype(np.float64)
    n_finite = xf.size
    with np.errstate(over="ignore", invalid="ignore"):
        diff = xf - df
        sum_sq_err = float(np.sum(diff * diff))
        sum_sq = float(np.sum(xf * xf))
        sum_xd = float(np.sum(xf * df))
        sum_dd = float(np.sum(df * df))
    underflow = int(np.count_nonzero((x != 0) & (code == 0)))  # NaN x is nonzero; NaN code too
    flushed = x[(x != 0) & (code == 0) & finite].astype(np.float64)
    sum_flushed = float(np.sum(flushed * flushed))
    mse = sum_sq_err / n_finite if n_finite else math.nan
    if sum_sq > 0:
        rel_mse = sum_sq_err / sum_sq
    else:
        rel_mse = math.inf if sum_sq_err > 0 else 0.0
    sqnr_db = -10.0 * math.log10(rel_mse) if rel_mse > 0 else (math.inf if rel_mse == 0 else math.nan)
    if sum_sq > 0 and sum_dd > 0:
        cos = sum_xd / math.sqrt(sum_sq * sum_dd)
    else:
        cos = 1.0 if (sum_sq == 0 and sum_dd == 0) else 0.0
    return {
        "mse": mse, "rel_mse": rel_mse, "sqnr_db": sqnr_db, "cos": cos,
        "underflow_pct": 100 * underflow / numel if numel else 0.0,
        "overflow_pct": 100 * q.overflow / numel if numel else 0.0,
        "underflow_energy_pct": 100 * sum_flushed / sum_sq if sum_sq > 0 else 0.0,
    }


# ---- delayed scaling replay

def read_amax_trace(path):
    """CSV 'step,tensor,amax' -> {(layer, role): {step: float32 amax}}."""
    out = {}
    with open(path, newline="", encoding="utf-8") as f:
        r = csv.reader(f)
        header = next(r, None)
        if header != ["step", "tensor", "amax"]:
            raise ValueError("%s: first line must be step,tensor,amax, got %r" % (path, header))
        for lineno, row in enumerate(r, start=2):
            if not row:
                continue
            if len(row) != 3:
                raise ValueError("%s:%d: expected 3 fields" % (path, lineno))
            step, key = int(row[0]), split_name(row[1])
            series = out.setdefault(key, {})
            if step in series:
                raise ValueError("%s:%d: %s step %d twice" % (path, lineno, row[1], step))
            series[step] = np.float32(float(row[2]))
    return out


def replay_delayed_scale(known, step, recipe, fp8_max):
    """TE DelayedScaling replayed from known amaxes {step: amax}: the scale used at `step`, or
    None when a step of a needed window is missing (no exact replay).

    Window for step t: steps [max(0, t-H), t-1] (max algo) or [t-1] (most_recent); reduced amax
    0, inf or NaN -> the scale of step t-1 (recursively); step 0 -> 1 (TE's initial scale)."""
    scaled_max = np.float32(fp8_max * 2.0 ** -recipe.margin)
    width = recipe.history if recipe.algo == "max" else 1
    t = step
    while t > 0:
        window = range(max(0, t - width), t)
        if any(s not in known for s in window):
            return None
        vals = np.array([known[s] for s in window], dtype=np.float32)
        amax = np.float32(np.nan) if np.isnan(vals).any() else vals.max()
        if np.isfinite(amax) and amax > 0:
            with np.errstate(over="ignore"):
                scale = scaled_max / amax
            return FLT_MAX if np.isinf(scale) else np.float32(scale)
        t -= 1
    return np.float32(1.0)


# ---- GEMM error

def rel_fro_and_cos(ref, got):
    g = got.astype(np.float64)
    ref_norm, got_norm = float(np.linalg.norm(ref)), float(np.linalg.norm(g))
    err = float(np.linalg.norm(g - ref))
    rel = err / ref_norm if ref_norm > 0 else (math.inf if err > 0 else 0.0)
    if ref_norm > 0 and got_norm > 0:
        cos = float(np.sum(g * ref)) / (ref_norm * got_norm)
    else:
        cos = 1.0 if ref_norm == 0 and got_norm == 0 else 0.0
    return rel, cos


_ERFC = np.frompyfunc(math.erfc, 1, 1)


def entry_damage(ref, got, sq):
    """zeroed_pct, sign_flip_pct, median_rel_err, noise_sign_flip_pct of the float32 output got
    against ref; sq: the float64 GEMM of the squared operands (None: no noise_sign_flip_pct)."""
    g = got.astype(np.float64).ravel()
    r = ref.ravel()
    e = r.size
    nz = r != 0
    zeroed = int(np.count_nonzero(nz & (g == 0)))
    flipped = int(np.count_nonzero(nz & (g != 0) & (np.signbit(g) != np.signbit(r))))
    rel = np.abs(g[nz] - r[nz]) / np.abs(r[nz])
    median = float(np.median(rel)) if rel.size else 0.0
    if sq is None:
        return (100 * zeroed / e if e else 0.0, 100 * flipped / e if e else 0.0, median, None)
    s = sq.ravel()
    noise = 0.0
    if e and s.sum() > 0:
        var = float(np.sum((g - r) ** 2)) / float(s.sum()) * s
        on = nz & (var > 0)
        noise = 100 * float(np.sum(_ERFC(np.abs(r[on]) / np.sqrt(2 * var[on])).astype(np.float64))) / 2 / e
    return (100 * zeroed / e if e else 0.0, 100 * flipped / e if e else 0.0, median, noise)


def gemm_rows(step, layer, ops, recipes, training_format, scales):
    """ops: {role: (input dtype string, float32 2-D array)}; scales: {(role, spec): per-tensor
    scale or None (delayed not replayable)}. X [M,K], W [N,K], dY [M,N]."""
    mats = {r: np.where(np.isfinite(a), a, np.float32(0.0)).astype(np.float32)
            for r, (_, a) in ops.items()}  # non-finite elements would make every GEMM NaN
    x, w, dy = mats["activation"], mats["weight"], mats["gradient"]
    (m, k), (n, k2), (m2, n2) = x.shape, w.shape, dy.shape
    if k != k2 or m != m2 or n != n2:
        print("peer_numpy: step %d layer %s: shapes X %s W %s dY %s do not fit, no GEMM rows"
              % (step, layer, x.shape, w.shape, dy.shape), file=sys.stderr)
        return []
    xd, wd, dyd = x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64)
    refs = {"fprop": xd @ wd.T, "dgrad": dyd @ wd, "wgrad": dyd.T @ xd}
    x2, w2, dy2 = xd * xd, wd * wd, dyd * dyd
    squares = {"fprop": x2 @ w2.T, "dgrad": dy2 @ w2, "wgrad": dy2.T @ x2}
    dims = {"fprop": (m, n, k), "dgrad": (m, k, n), "wgrad": (n, k, m)}
    rows = []
    for rc in recipes:
        if rc.per_tensor and any(scales[(role, rc.spec)] is None for role in mats):
            continue
        cache = {}

        def q(role, orient):
            if orient not in rc.orientations(role):
                orient = "rowwise"  # same numbers for both copies
            if (role, orient) not in cache:
                dtype = role_dtype(role, training_format)
                qz = fake_quantize(mats[role], rc, dtype, role, orient,
                                   scales.get((role, rc.spec)), ops[role][0])
                # The dequantised values exactly: per-tensor q / scale (an FP8 GEMM multiplies
                # the codes and scales the sums), blocked and bf16 deq (exact already but for
                # block:fp32, whose deq is what the scaled blocks hold).
                cache[(role, orient)] = (qz.code.astype(np.float64) / np.float64(qz.scale)
                                         if rc.per_tensor else qz.deq.astype(np.float64))
            return cache[(role, orient)]

        got = {
            "fprop": q("activation", "rowwise") @ q("weight", "rowwise").T,
            "dgrad": q("gradient", "rowwise") @ q("weight", "columnwise"),
            "wgrad": q("gradient", "columnwise").T @ q("activation", "columnwise"),
        }
        for g in ("fprop", "dgrad", "wgrad"):
            rel, cos = rel_fro_and_cos(refs[g], got[g])
            zeroed, flipped, median, noise = entry_damage(refs[g], got[g],
                                                          squares[g] if g == "wgrad" else None)
            mm, nn, kk = dims[g]
            rows.append([str(step), layer, g, rc.spec, training_format, fmt_num(rel), fmt_num(cos),
                         str(mm), str(nn), str(kk), fmt_num(zeroed), fmt_num(flipped),
                         fmt_num(median), "" if noise is None else fmt_num(noise)])
    return rows


def write_rows(header, rows, out):
    text = io.StringIO()
    w = csv.writer(text, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    if out in (None, "-"):
        sys.stdout.write(text.getvalue())
    else:
        with open(out, "w", encoding="utf-8", newline="") as f:
            f.write(text.getvalue())


def run_all(files, training_format, recipes, out, trace_path=None, gemms_out=None):
    recipes = [Recipe(r) for r in recipes]
    loaded = [read_safetensors(p) for p in files]
    loaded.sort(key=lambda mt: step_of(mt[0]))  # stable: rows by step, then tensor name

    # Known amaxes for delayed scaling: the trace, completed with the captured tensors' own.
    known = read_amax_trace(trace_path) if trace_path else {}
    for meta, tensors in loaded:
        for name, (_, _, x) in tensors.items():
            known.setdefault(split_name(name), {}).setdefault(step_of(meta), raw_amax(x))

    rows, grows = [], []
    for meta, tensors in loaded:
        step = step_of(meta)
        layers = {}
        scales = {}
        for name in sorted(tensors):
            in_dtype, _, x = tensors[name]
            layer, role = split_name(name)
            x2 = view_2d(x)
            layers.setdefault(layer, {})[role] = (in_dtype, x2)
            dtype = role_dtype(role, training_format)
            amax = raw_amax(x)
            for rc in recipes:
                scale = None
                if rc.kind == "current":
                    scale = compute_scale(amax, FP8[dtype][1], rc.pow2, rc.eps)
                elif rc.kind == "delayed":
                    scale = replay_delayed_scale(known[(layer, role)], step, rc, FP8[dtype][1])
                scales[(layer, role, rc.spec)] = scale
                if rc.kind == "delayed" and scale is None:
                    print("peer_numpy: step %d %s %s: amax trace does not cover the history "
                          "window, no row" % (step, name, rc.spec), file=sys.stderr)
                    continue
                for orient in rc.orientations(role):
                    qz = fake_quantize(x2, rc, dtype, role, orient, scale, in_dtype)
                    m = error_metrics(x2, qz)
                    rows.append([str(step), layer, role, rc.spec, training_format,
                                 "bf16" if rc.kind == "bf16" else dtype,
                                 "" if qz.scale is None else fmt_num(qz.scale), fmt_num(amax)]
                                + [fmt_num(m[c]) for c in ("mse", "rel_mse", "sqnr_db", "cos",
                                                            "underflow_pct", "overflow_pct")]
                                + [orient, str(qz.saturated), fmt_num(qz.sinv_min),
                                   fmt_num(qz.sinv_max), fmt_num(m["underflow_energy_pct"])])
        if gemms_out is not None:
            for layer in sorted(layers):
                ops = layers[layer]
                if set(ops) != {"activation", "weight", "gradient"}:
                    continue
                sc = {(role, rc.spec): scales[(layer, role, rc.spec)]
                      for role in ops for rc in recipes}
                grows.extend(gemm_rows(step, layer, ops, recipes, training_format, sc))
    write_rows(ALL_HEADER, rows, out)
    if gemms_out is not None:
        write_rows(GEMM_HEADER, grows, gemms_out)


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
    ap.add_argument("--recipes", default="current,current:pow2",
                    help="--all: comma-separated recipe specs: current[:pow2][:eps=V], "
                         "delayed[:history=H][:algo=max|most_recent][:margin=M], block[:fp32], "
                         "mxfp8[:floor], bf16")
    ap.add_argument("--amax-trace", metavar="FILE.csv",
                    help="--all: amax trace (step,tensor,amax) for replaying delayed scaling")
    ap.add_argument("--gemms", metavar="OUT.csv",
                    help="--all: also write the fprop/dgrad/wgrad output error of every recipe")
    args = ap.parse_args(argv)

    if args.all:
        recipes = [r for r in args.recipes.split(",")]
        for r in recipes:
            Recipe(r)
        run_all(args.files, args.format, recipes, args.csv_out or "-", args.amax_trace,
                args.gemms)
    else:
        if args.amax_trace or args.gemms:
            ap.error("--amax-trace and --gemms need --all")
        if len(args.files) != 1:
            ap.error("--candidates mode takes one file")
        ks = [int(k) for k in args.candidates.split(",")]
        run_candidates(args.files[0], args.tensor, ks, max(1, args.repeat), args.csv_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
