"""FP8 quantise-dequantise of Transformer Engine's recipes in PyTorch (needs torch >= 2.1 for the
float8 dtypes), as the outcome harness trains with it.

Every function takes the tensor as the GEMM receives it (BF16 under autocast) and returns the
dequantised float32 tensor with the numbers fp8-advisor reports for it (METRICS.md,
"Quantisation"): the FP8 cast is x * scale in fp32, clamped to +-fp8_max (TE's saturating cast)
and rounded to nearest even by torch's float8 conversion; deq = code * scale_inv in fp32.

Recipes (``Recipe``): ``current`` (per-tensor, fp8_max / amax), ``delayed`` (per-tensor, the scale
from an amax history of earlier steps: ``DelayedScale``), ``block`` (TE Float8BlockScaling: 1x128
blocks, 128x128 for weights, power-of-two scales), ``mxfp8`` (32-element blocks, E8M0 scales
rounded up) and ``bf16`` (no FP8: the operand as received). ``test_codec.py`` checks every one
bit for bit against `fp8-advisor run`'s metrics.csv.
"""

import math

import torch

FP8 = {"e4m3": (torch.float8_e4m3fn, 448.0), "e5m2": (torch.float8_e5m2, 57344.0)}
FLT_MAX = 3.4028234663852886e38
BF16_MAX = 3.3895313892515355e38  # TE's value_for_inf for BF16 inputs (block scales)
# |x * scale| beyond the last rounding boundary past max finite: what the saturating cast clipped.
SATURATED_ABOVE = {"e4m3": (464.0, False), "e5m2": (61440.0, True)}  # (bound, inclusive)


def role_dtype(fmt, role):
    """TE recipe.Format: e4m3 everywhere, or hybrid (E5M2 gradients)."""
    return "e5m2" if (fmt == "hybrid" and role == "gradient") else "e4m3"


class Recipe(object):
    """A recipe as fp8-advisor's --recipes spells it: current, delayed[:history=H:algo=A:margin=M],
    block, mxfp8, bf16."""

    def __init__(self, spec):
        fields = spec.split(":")
        self.kind = fields[0]
        self.history, self.algo, self.margin = 1024, "max", 0
        for f in fields[1:]:
            key, _, val = f.partition("=")
            if self.kind != "delayed" or key not in ("history", "algo", "margin"):
                raise ValueError("recipe option %r not supported in %r" % (f, spec))
            if key == "algo":
                if val not in ("max", "most_recent"):
                    raise ValueError("algo must be max or most_recent in %r" % spec)
                self.algo = val
            else:
                setattr(self, key, int(val))
        if self.kind not in ("current", "delayed", "block", "mxfp8", "bf16"):
            raise ValueError("unknown recipe kind in %r" % spec)
        self.spec = ("delayed:history=%d:algo=%s:margin=%d" % (self.history, self.algo, self.margin)
                     if self.kind == "delayed" else self.kind)

    @property
    def per_tensor(self):
        return self.kind in ("current", "delayed")

    def block(self, role, orientation):
        """(rows, cols) of a scaling block in the 2-D view [tokens, features] / [out, in]."""
        if self.kind == "block":
            if role == "weight":
                return (128, 128)
            return (1, 128) if orientation == "rowwise" else (128, 1)
        return (1, 32) if orientation == "rowwise" else (32, 1)


def view_2d(x):
    return x.reshape(-1, x.shape[-1]) if x.dim() >= 2 else x.reshape(1, -1)


def absmax(x):
    """max |x| over the non-NaN elements (TE's amax kernel skips NaN), fp32 0-dim; 0 if none."""
    a = x.detach().float().abs()
    a = torch.where(torch.isnan(a), torch.zeros_like(a), a)
    return a.max() if a.numel() else torch.zeros((), dtype=torch.float32)


def scale_from_amax(amax, fp8_max, value_for_inf=FLT_MAX, pow2=False):
    """TE compute_scale_from_amax (eps 0), elementwise on a float32 tensor."""
    amax = amax.float()
    scale = torch.full_like(amax, fp8_max) / amax
    bad = (amax == 0) | ~torch.isfinite(amax)
    scale = torch.where(torch.isposinf(scale), torch.full_like(scale, value_for_inf), scale)
    scale = torch.where(bad, torch.ones_like(scale), scale)
    if pow2:
        scale = (scale.view(torch.int32) & -8388608).view(torch.float32)
    return scale


def e8m0_te(amax, fp8_max):
    """TE MXFP8: biased exponent of amax * fp32(1/fp8_max) rounded up; 0 -> 0, <= 2^-127 -> 0,
    at most 254, inf -> 254, NaN -> 255."""
    y = (amax.float() * torch.tensor(1.0 / fp8_max, dtype=torch.float32)).double()
    mant, ex = torch.frexp(y)
    e = torch.where(mant == 0.5, ex - 1, ex).long() + 127
    e = torch.clamp(e, 0, 254)
    e = torch.where(y == 0, torch.zeros_like(e), e)
    e = torch.where(torch.isinf(y), torch.full_like(e, 254), e)
    return torch.where(torch.isnan(y), torch.full_like(e, 255), e)


class Quantized(object):
    """One quantised copy: deq (float32, the 2-D view's shape), code (the FP8 values as float32),
    scale (per-tensor fp32 0-dim, or None), the range of the dequantisation factors over the
    blocks (sinv_min, sinv_max), the clipped and overflow element counts."""
    __slots__ = ("deq", "code", "scale", "sinv_min", "sinv_max", "saturated", "overflow")


def quantize(x, recipe, dtype, role, orientation="rowwise", scale=None):
    """Quantise-dequantise x (any shape, seen as 2-D) under recipe in FP8 type dtype.
    Per-tensor recipes take their fp32 scale (``scale``; current: computed here when None)."""
    x2 = view_2d(x).float()
    q = Quantized()
    if recipe.kind == "bf16":
        q.deq = q.code = x2.to(torch.bfloat16).float()
        q.scale, q.saturated, q.overflow = None, 0, 0
        q.sinv_min = q.sinv_max = torch.ones((), dtype=torch.float32)
        return q
    fp8_type, fp8_max = FP8[dtype]
    if recipe.per_tensor:
        sc = scale_from_amax(absmax(x2), fp8_max) if scale is None else scale.float()
        si = torch.ones((), dtype=torch.float32) / sc
        thr = torch.tensor(fp8_max, dtype=torch.float32) * si
        q.scale = sc
        q.sinv_min = q.sinv_max = si
    else:
        br, bc = recipe.block(role, orientation)
        r, c = x2.shape
        rb, cb = -(-r // br), -(-c // bc)
        pad = torch.zeros((rb * br, cb * bc), dtype=torch.float32)
        a = x2.abs()
        pad[:r, :c] = torch.where(torch.isnan(a), torch.zeros_like(a), a)
        amax = pad.reshape(rb, br, cb, bc).amax(dim=(1, 3))
        if recipe.kind == "block":
            s_blk = scale_from_amax(amax, fp8_max, BF16_MAX, pow2=True)
            si_blk = torch.ones_like(s_blk) / s_blk
        else:
            e = e8m0_te(amax, fp8_max)
            one = torch.ones(e.shape, dtype=torch.float32)
            s_blk = torch.ldexp(one, (127 - e).float()).float()
            si_blk = torch.ldexp(one, (e - 127).float()).float()
        thr_blk = torch.tensor(fp8_max, dtype=torch.float32) * si_blk

        def expand(v):
            return v.repeat_interleave(br, 0).repeat_interleave(bc, 1)[:r, :c]

        sc, si, thr = expand(s_blk), expand(si_blk), expand(thr_blk)
        q.scale, q.sinv_min, q.sinv_max = None, si_blk.min(), si_blk.max()
    y = x2 * sc
    bound, inclusive = SATURATED_ABOVE[dtype]
    q.saturated = int(((y.abs() >= bound) if inclusive else (y.abs() > bound)).sum())
    q.code = torch.clamp(y, -fp8_max, fp8_max).to(fp8_type).float()
    q.deq = q.code * si
    q.overflow = int((x2.abs() > thr).sum())
    return q


class DelayedScale(object):
    """TE DelayedScaling for one tensor: the scale of step t is (fp8_max * 2^-margin) / the amax
    reduced over the history window of earlier steps ([t-H, t-1] for max, t-1 for most_recent);
    a reduced amax of 0, inf or NaN keeps the previous scale; step 0 uses 1. The amax of a step is
    the max over its micro-batches (the project's trace convention, fp8a_capture)."""

    def __init__(self, recipe, fp8_max):
        self.recipe = recipe
        self.scaled_max = torch.tensor(fp8_max * 2.0 ** -recipe.margin, dtype=torch.float32)
        self.history = []  # amax of every finished step (float32 0-dim)
        self.scale = torch.ones((), dtype=torch.float32)
        self.step_amax = None

    def observe(self, x):
        """Record a micro-batch's tensor (NaN-propagating max, as the amax trace)."""
        a = x.detach().float().abs().max() if x.numel() else torch.zeros(())
        self.step_amax = a if self.step_amax is None else torch.maximum(self.step_amax, a)

    def end_step(self):
        """Close the step: its amax joins the history and the next step's scale is computed."""
        if self.step_amax is None:
            return
        self.history.append(self.step_amax)
        self.step_amax = None
        width = self.recipe.history if self.recipe.algo == "max" else 1
        window = torch.stack(self.history[-width:])
        amax = window.max()  # NaN-propagating
        if bool(torch.isfinite(amax)) and float(amax) > 0:
            s = self.scaled_max / amax
            self.scale = torch.full((), FLT_MAX, dtype=torch.float32) if bool(torch.isinf(s)) else s


def error_sums(x, q):
    """(mse, underflow_count) of copy q of x over the finite elements, as metrics.csv
    (fp64 sums; underflow: x != 0 with a zero code)."""
    x2 = view_2d(x).float()
    fin = torch.isfinite(x2)
    xd, dd = x2[fin].double(), q.deq[fin].double()
    n = xd.numel()
    mse = float(((xd - dd) ** 2).sum()) / n if n else math.nan
    under = int(((x2 != 0) & (q.code == 0)).sum())
    return mse, under
