#!/usr/bin/env python3
"""Writes the nvdlfw_inspect statistics log TE's debug features would write for captured tensors.

For every GEMM operand of a capture (safetensors files named ..._step_NNNNNN.safetensors, tensors
"<layer>.<activation|weight|gradient>"), the lines TE's LogTensorStats and LogFp8TensorStats log
at that step, in TE's line format ("<layer>_<tensor>_<stat> \\t\\t\\t\\t iteration=NNNNNN \\t\\t\\t\\t
value=V"), as `fp8-advisor log-config` asks for them, with every digit (fp8a_capture.stats_logger's
precision; --rounded prints value={:.4f} as nvdlfw's default logger does).

Follows TE's source (transformer_engine/debug/features/utils/stats_computation.py and
log_fp8_tensor_stats.py):
  - mean torch.mean, std torch.std (n-1), cur_amax max|x| (LogTensorStats, as log-config asks);
  - <recipe>_underflows% = (x.count_nonzero() - nonzero FP8 codes) / numel * 100;
  - <recipe>_mse = F.mse_loss(x, dequantize(q)) (mean);
  - <recipe>_scale_inv_min / _max over the copy's scale_inv, MXFP8's as the biased E8M0 exponent;
  - the what-if quantizers of _get_new_quantizer: Float8CurrentScalingQuantizer (scale
    fp8_max / amax, no pow2, no epsilon), Float8BlockQuantizer (its default 128x128 tiles for every
    tensor, power-of-two scales) and MXFP8Quantizer (1x32, E8M0), each in the training tensor's FP8
    type (hybrid: E5M2 gradients); _columnwise for block and MXFP8;
  - --training-recipe nvfp4: LogNvfp4TensorStats' nvfp4_underflows% and nvfp4_mse of the run's own
    NVFP4 copy (log_nvfp4_tensor_stats.py: the rowwise FP4 data; get_stat_with_prefix names them
    "nvfp4_<stat>"): 16x16 weight tiles, stochastically rounded gradients.
The casts are calibration/fp8emu.py's (an emulation written apart from fp8-advisor's engine).
"""
import argparse
import glob
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "calibration"))
import torch  # noqa: E402
import fp8emu  # noqa: E402
from test_codec import read_safetensors  # noqa: E402

ROLES = ("activation", "weight", "gradient")


class WhatIf(fp8emu.Recipe):
    """TE's what-if block quantizer: 128x128 tiles for every tensor and orientation."""

    def block(self, role, orientation):
        if self.kind == "block":
            return (128, 128)
        return fp8emu.Recipe.block(self, role, orientation)


WHAT_IFS = (("fp8_current_scaling", "current", False), ("fp8_block_scaling", "block", True),
            ("mxfp8", "mxfp8", True))


def line(name, step, value, rounded):
    v = "%.4f" % value if rounded else repr(float(value))
    return "%s \t\t\t\t iteration=%06d \t\t\t\t value=%s\n" % (name, step, v)


def nvfp4_lines(layer, role, step, x2, rounded):
    """LogNvfp4TensorStats' lines: underflows% from the rowwise FP4 codes, mse against them."""
    q = fp8emu.nvfp4_quantize(x2, fp8emu.Recipe("nvfp4"), role, "rowwise")
    under = (int(torch.count_nonzero(x2)) - int(torch.count_nonzero(q.code))) / x2.numel() * 100.0
    mse = float(((x2.double() - q.deq.double()) ** 2).mean())
    return [line("%s_%s_nvfp4_%s" % (layer, role, stat), step, v, rounded)
            for stat, v in (("underflows%", under), ("mse", mse))]


def tensor_lines(layer, role, step, x, fmt, rounded, training=None):
    x = x.float()
    out = [line("%s_%s_%s" % (layer, role, stat), step, v, rounded) for stat, v in (
        ("cur_amax", float(x.abs().max())), ("mean", float(x.mean())), ("std", float(x.std())))]
    x2 = fp8emu.view_2d(x)
    numel = x2.numel()
    nonzero = int(torch.count_nonzero(x2))
    dtype = fp8emu.role_dtype(fmt, role)
    for te_name, spec, columnwise in WHAT_IFS:
        recipe = WhatIf(spec)
        for orientation in (("rowwise", "columnwise") if columnwise else ("rowwise",)):
            if orientation == "columnwise":
                q = fp8emu.quantize(x2.t().contiguous(), recipe, dtype, role, "rowwise")
                ref = x2.t()
            else:
                q = fp8emu.quantize(x2, recipe, dtype, role, orientation)
                ref = x2
            suffix = "_columnwise" if orientation == "columnwise" else ""
            under = (nonzero - int(torch.count_nonzero(q.code))) / numel * 100.0
            mse = float(((ref.double() - q.deq.double()) ** 2).mean())
            smin, smax = float(q.sinv_min), float(q.sinv_max)
            if spec == "mxfp8":  # TE logs the biased E8M0 exponent
                smin, smax = math.log2(smin) + 127, math.log2(smax) + 127
            for stat, v in (("underflows%", under), ("mse", mse), ("scale_inv_min", smin),
                            ("scale_inv_max", smax)):
                out.append(line("%s_%s_%s_%s%s" % (layer, role, te_name, stat, suffix), step, v, rounded))
    if training == "nvfp4":
        out += nvfp4_lines(layer, role, step, x2, rounded)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("capture", help="a directory of *_step_NNNNNN.safetensors files")
    ap.add_argument("--out", required=True, help="the log file to write")
    ap.add_argument("--format", default="hybrid", choices=("hybrid", "e4m3"))
    ap.add_argument("--rounded", action="store_true", help="4 decimals, as nvdlfw's default logger")
    ap.add_argument("--training-recipe", choices=("nvfp4",), help="also the run's own LogNvfp4TensorStats")
    a = ap.parse_args(argv)
    lines = []
    for path in sorted(glob.glob(os.path.join(a.capture, "*step_*.safetensors"))):
        step, tensors = read_safetensors(path)
        for name, x in tensors.items():
            layer, _, role = name.rpartition(".")
            if role in ROLES:
                lines += tensor_lines(layer, role, step, x, a.format, a.rounded, a.training_recipe)
    with open(a.out, "w") as f:
        f.writelines(lines)
    print("%s: %d lines" % (a.out, len(lines)))


if __name__ == "__main__":
    main()
