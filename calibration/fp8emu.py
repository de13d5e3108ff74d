"""FP8 quantise-dequantise of Transformer Engine's recipes in PyTorch (needs torch >= 2.1 for the
float8 dtypes), as the outcome harness trains with it.

Every function takes the tensor as the GEMM receives it (BF16 under autocast) and returns the
dequantised float32 tensor with the numbers fp8-advisor reports for it (METRICS.md,
"Quantisation"): the FP8 cast is x * scale in fp32, clamped to +-fp8_max (TE's saturating cast)
and rounded to nearest even by torch's float8 conversion; deq = code * scale_inv in fp32.

Recipes (``Recipe``): ``current`` (per-tensor, fp8_max / amax), ``delayed`` (per-tensor, the scale
from an amax history of earlier steps: ``DelayedScale``), ``block`` (TE Float8BlockScaling: 1x128
blocks, 128x128 for weights, power-of-two scales), ``mxfp8`` (32-element blocks, E8M0 scales
rounded up), ``nvfp4`` (TE NVFP4BlockScaling, TE 2.14+'s block rule: ``nvfp4_quantize``) and
``bf16`` (no FP8: the operand as received). ``test_codec.py`` checks every one bit for bit against
`fp8-advisor run`'s metrics.csv.
"""

import math

import torch

FP8 = {"e4m3": (torch.float8_e4m3fn, 448.0), "e5m2": (torch.float8_e5m2, 57344.0)}
FLT_MAX = 3.4028234663852886e38
BF16_MAX = 3.3895313892515355e38  # TE's value_for_inf for BF16 inputs (block scales)
# |x * scale| beyond the last rounding boundary past max finite: what the saturating cast clipped.
SATURATED_ABOVE = {"e4m3": (464.0, False), "e5m2": (61440.0, True)}  # (bound, inclusive)


NVFP4_SWITCHES = {"no_rht": "rht", "no_sr": "sr", "no_2d": "two_d"}  # option -> Recipe attribute


def role_dtype(fmt, role):
    """TE recipe.Format: e4m3 everywhere, or hybrid (E5M2 gradients)."""
    return "e5m2" if (fmt == "hybrid" and role == "gradient") else "e4m3"


class Recipe(object):
    """A recipe as fp8-advisor's --recipes spells it: current, delayed[:history=H:algo=A:margin=M],
    block, mxfp8, nvfp4[:no_rht][:no_sr][:no_2d], bf16."""

    def __init__(self, spec):
        fields = spec.split(":")
        self.kind = fields[0]
        self.history, self.algo, self.margin = 1024, "max", 0
        self.rht = self.sr = self.two_d = True
        for f in fields[1:]:
            if self.kind == "nvfp4" and f in NVFP4_SWITCHES:
                setattr(self, NVFP4_SWITCHES[f], False)
                continue
            key, _, val = f.partition("=")
            if self.kind != "delayed" or key not in ("history", "algo", "margin"):
                raise ValueError("recipe option %r not supported in %r" % (f, spec))
            if key == "algo":
                if val not in ("max", "most_recent"):
                    raise ValueError("algo must be max or most_recent in %r" % spec)
                self.algo = val
            else:
                setattr(self, key, int(val))
        if self.kind not in ("current", "delayed", "block", "mxfp8", "nvfp4", "bf16"):
            raise ValueError("unknown recipe kind in %r" % spec)
        self.spec = self.kind
        if self.kind == "delayed":
            self.spec = "delayed:history=%d:algo=%s:margin=%d" % (self.history, self.algo, self.margin)
        elif self.kind == "nvfp4":  # fp8-advisor's order
            self.spec += "".join(":" + k for k, attr in NVFP4_SWITCHES.items() if not getattr(self, attr))

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
    if not a.numel():
        return torch.zeros((), dtype=torch.float32)
    m = a.max()  # NaN when any element is: then again without them
    return m if not torch.isnan(m) else no_nan(a).max()


def no_nan(a):
    """a with NaN as 0 (infinities kept), in one pass."""
    return torch.nan_to_num(a, nan=0.0, posinf=math.inf, neginf=-math.inf)


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
    zero (where the copy holds 0: code == 0, or for NVFP4 deq == 0), scale (per-tensor fp32 0-dim,
    or None; NVFP4: the level-2 encode scale), scale_inv (NVFP4: the level-2 decode factor), the
    range of the dequantisation factors over the blocks (sinv_min, sinv_max), the clipped and
    overflow element counts."""
    __slots__ = ("deq", "code", "zero", "scale", "scale_inv", "sinv_min", "sinv_max", "saturated",
                 "overflow")


def quantize(x, recipe, dtype, role, orientation="rowwise", scale=None, seed=None, stats=True):
    """Quantise-dequantise x (any shape, seen as 2-D) under recipe in FP8 type dtype.
    Per-tensor recipes take their fp32 scale (``scale``; current: computed here when None).
    NVFP4 ignores dtype; ``seed`` is its stochastic rounding stream (None: fp8-advisor's).
    stats=False (training, which reads deq alone): the FP8 recipes leave zero, saturated and
    overflow None, three passes fewer; deq is the same."""
    x2 = view_2d(x).float()
    if recipe.kind == "nvfp4":
        return nvfp4_quantize(x2, recipe, role, orientation, seed)
    q = Quantized()
    if recipe.kind == "bf16":
        q.deq = q.code = x2.to(torch.bfloat16).float()
        q.zero = q.code == 0
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
        pad[:r, :c] = no_nan(a)
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

        sc, si = expand(s_blk), expand(si_blk)
        thr = expand(thr_blk) if stats else None
        q.scale, q.sinv_min, q.sinv_max = None, si_blk.min(), si_blk.max()
    y = x2 * sc
    q.code = torch.clamp(y, -fp8_max, fp8_max).to(fp8_type).float()
    q.deq = q.code * si
    if not stats:
        q.zero = q.saturated = q.overflow = None
        return q
    bound, inclusive = SATURATED_ABOVE[dtype]
    q.saturated = int(((y.abs() >= bound) if inclusive else (y.abs() > bound)).sum())
    q.zero = q.code == 0
    q.overflow = int((x2.abs() > thr).sum())
    return q


# ---- NVFP4 (TE NVFP4BlockScaling; fp8-advisor core/nvfp4.hpp, docs/NVFP4-TE.md) ----------------

NVFP4_BLOCK = 16
E2M1_MAX = 6.0
# TE's wgrad sign vector (get_wgrad_sign_vector, the same since TE 2.8) and fp8-advisor's seeds of
# the stochastic rounding stream (engine/quant_spec.cpp nvfp4_copy_for: one per role and orientation).
NVFP4_RHT_SIGNS = (1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1)
NVFP4_SEED_BASE = 0x4E56465034
ROLES = ("activation", "weight", "gradient")
_HADAMARD = torch.tensor([[-1.0 if bin(i & j).count("1") % 2 else 1.0 for j in range(16)]
                          for i in range(16)], dtype=torch.float64)
_SIGNS = torch.tensor(NVFP4_RHT_SIGNS, dtype=torch.float64)


def nvfp4_seed(role, orientation):
    return NVFP4_SEED_BASE + 2 * ROLES.index(role) + (orientation == "columnwise")


def _f32(v):
    return torch.tensor(v, dtype=torch.float32)


def _hadamard16(v):
    """v [16, N] float64 (a run of 16 per column) -> H16 v, each sum accumulated over i = 0..15
    in order (as core/nvfp4.hpp hadamard16, so that the doubles agree bit for bit)."""
    out = torch.zeros_like(v)
    for i in range(NVFP4_BLOCK):
        out += _HADAMARD[i].unsqueeze(1) * v[i]
    return out


def _u64(c):
    """An unsigned 64-bit constant as the int64 with its bits."""
    return c - (1 << 64) if c >= 1 << 63 else c


def _shr(z, k):
    """Logical right shift of int64 bits."""
    return (z >> k) & ((1 << (64 - k)) - 1)


def nvfp4_random_bits(seed, index):
    """8 random bits per element index (int64 tensor): splitmix64 of (seed, index), as fp8-advisor
    draws them (core/nvfp4.hpp nvfp4_random_bits; int64 arithmetic wraps as uint64 does)."""
    z = _u64(seed % (1 << 64)) + (index + 1) * _u64(0x9E3779B97F4A7C15)
    z = (z ^ _shr(z, 30)) * _u64(0xBF58476D1CE4E5B9)
    z = (z ^ _shr(z, 27)) * _u64(0x94D049BB133111EB)
    return _shr(z ^ _shr(z, 31), 56)


def round_e2m1(y):
    """Nearest-even onto E2M1 ({0, .5, 1, 1.5, 2, 3, 4, 6}), saturating at 6; NaN stays NaN:
    below 1 a multiple of 1/2 (torch.round is half-even); from 1 on, FP32 rounded to one mantissa
    bit, half-even, on its bits."""
    a = torch.clamp(y.abs(), max=E2M1_MAX)
    bits = a.view(torch.int32)
    normal = (bits + ((1 << 21) - 1) + ((bits >> 22) & 1)) & ~((1 << 22) - 1)
    q = torch.where(a < 1, torch.round(a * 2) * 0.5, normal.view(torch.float32))
    return torch.copysign(q, y)


def stochastic_round_e2m1(y, rbits):
    """TE's software stochastic rounding (util/ptx.cuh): |y| plus rbits/256 of its grid step,
    truncated to the grid at that sum, at most 6 (NaN gives 6, as fp8-advisor's)."""
    def step_of(a):
        return torch.where(a < 2, 0.5, torch.where(a < 4, 1.0, 2.0)).float()
    a = y.abs()
    t = (rbits.double() / 256.0 * step_of(a).double() + a.double()).float()  # fma: one rounding
    st = step_of(t)
    q = torch.floor(t / st) * st
    q = torch.where(q < E2M1_MAX, q, _f32(E2M1_MAX))
    return torch.copysign(q, y)


def nvfp4_quantize(x2, recipe, role, orientation, seed=None):
    """One NVFP4 copy of the 2-D float32 tensor x2 as TE's NVFP4BlockScaling makes it (TE 2.14+'s
    block rule; fp8-advisor's nvfp4_quantize_piece): weights in 16x16 tiles (unless no_2d), other
    copies in blocks of 16 along the rows (rowwise) or down the columns (columnwise); the wgrad
    copies (columnwise activation and gradient) through the Hadamard transform (unless no_rht),
    gradients stochastically rounded (unless no_sr) from `seed`'s stream keyed by the element's
    place (None: fp8-advisor's seed for the role and orientation). deq is in x2's domain. Both
    dimensions must be multiples of 16, as TE requires (fp8-advisor skips other shapes)."""
    columnwise = orientation == "columnwise"
    two_d = role == "weight" and recipe.two_d
    rht = columnwise and role != "weight" and recipe.rht and not two_d
    stochastic = role == "gradient" and recipe.sr
    r, c = x2.shape
    if r % NVFP4_BLOCK or c % NVFP4_BLOCK:
        raise ValueError("NVFP4 needs both dimensions divisible by 16 (TE): %dx%d" % (r, c))
    # Blocks of 16 as [16, blocks]: a column per block (a 16x16 tile: 16 such columns, tile-major).
    if two_d:
        split, perm = (r // 16, 16, c // 16, 16), (1, 0, 2, 3)
    elif columnwise:
        split, perm = (r // 16, 16, c), (1, 0, 2)
    else:
        split, perm = (r, c // 16, 16), (2, 0, 1)
    inverse = tuple(sorted(range(len(perm)), key=perm.__getitem__))

    def to_blocks(t):
        return t.reshape(split).permute(perm).reshape(16, -1)

    def from_blocks(t):
        return t.reshape([split[i] for i in perm]).permute(inverse).reshape(r, c)

    v = to_blocks(x2)
    if rht:
        v = (_hadamard16(v.double() * _SIGNS.unsqueeze(1)) * 0.25).float().bfloat16().float()
    a = v.abs().nan_to_num(nan=0.0)
    if two_d:  # a tile's 256 elements are 16 columns of v, tile-major
        blk = a.reshape(16, -1, 16).amax(dim=(0, 2))
        per = lambda t: t.repeat_interleave(16)
    else:
        blk = a.amax(dim=0)
        per = lambda t: t
    amax = blk.max() if blk.numel() else _f32(0.0)
    s_enc = torch.minimum(_f32(448.0 * E2M1_MAX) / amax, _f32(FLT_MAX))  # NaN cannot occur
    if float(amax) == 0.0 or float(s_enc) == 0.0:
        s_enc = _f32(1.0)
    decode = _f32(float(amax) / 2688.0)
    bs = blk * (s_enc * _f32(1.0 / E2M1_MAX))
    scale = torch.clamp(bs.nan_to_num(nan=FLT_MAX), max=448.0).to(torch.float8_e4m3fn).float()
    factor = torch.ones((), dtype=torch.float32) / (scale * (torch.ones((), dtype=torch.float32) / s_enc))
    factor = torch.clamp(factor.nan_to_num(nan=FLT_MAX), max=FLT_MAX)
    y = v * per(factor)
    if stochastic:
        index = to_blocks(torch.arange(r * c, dtype=torch.int64).reshape(r, c))
        code = stochastic_round_e2m1(y, nvfp4_random_bits(
            nvfp4_seed(role, orientation) if seed is None else seed, index))
    else:
        code = round_e2m1(y)
    deq = (code.double() * per(scale).double() * float(decode)).float()
    if rht:  # back from the transform's domain: (y H16 / 4) * signs in double, rounded to FP32
        deq = (_hadamard16(deq.double()) * 0.25 * _SIGNS.unsqueeze(1)).float()
    q = Quantized()
    q.deq = from_blocks(deq)
    q.code = code  # E2M1 values, [16, blocks] (in the transform's domain where applied)
    q.zero = q.deq == 0
    q.scale, q.scale_inv = s_enc, decode
    unit = (scale.double() * float(decode)).float()
    q.sinv_min, q.sinv_max = unit.min(), unit.max()
    # A block whose scale is 0 decodes to 0: flushed (underflow), neither overflow nor saturated.
    ay = y.abs() * (per(scale) > 0)
    q.overflow = int((ay > E2M1_MAX).sum())
    q.saturated = int((ay >= 7.0).sum())
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
    under = int((fin & (x2 != 0) & q.zero).sum())
    return mse, under
