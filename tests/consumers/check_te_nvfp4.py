"""fp8-advisor's NVFP4 quantiser against Transformer Engine's own reference quantiser.

TE ships a pure-PyTorch NVFP4 quantiser, `NVFP4QuantizerRef`
(transformer_engine/pytorch/custom_recipes/reference_nvfp4.py), which TE's tests hold bit for bit
to its CUDA kernels (tests/pytorch/nvfp4/test_nvfp4_quantize_exact.py,
test_nvfp4_rht_quantize_exact.py). Here it runs on the CPU from TE's sources (loaded by path; the
two base classes it imports from TE's compiled package are stood in for: it uses neither), on
BF16 tensors written as a capture; `fp8-advisor run --recipes nvfp4` evaluates the same capture.
For every copy TE's reference can make (X rowwise in 1x16 blocks; X columnwise, the wgrad copy,
with the Hadamard transform and, under nvfp4:no_rht, without; W in 16x16 tiles and, under
nvfp4:no_2d, in 1x16 blocks both ways) the decoded values of the reference (code x E4M3
block scale x amax / 2688, the transform undone exactly as METRICS.md defines the comparison)
must give exactly the numbers metrics.csv has: the level-2 scale and decode factor bits, the
blocks' decode range bits, the underflow count, and mse to 1e-12 relative (the values agree bit
for bit; only the float64 sum runs in another order). dY's copies are stochastically rounded,
which the reference does not model; they are left out.

  PY check_te_nvfp4.py FP8_ADVISOR_BINARY
"""
import csv
import importlib.util
import os
import subprocess
import sys
import tempfile
import types

import numpy as np
import torch

import fp8a_safetensors  # python/'s writer, installed in the consumers' venv
from _common import TE_SRC, CheckFailed, main

MSE_REL_TOL = 1e-12
SIGNS = [1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1]


def te_reference():
    """reference_nvfp4 from TE's sources, with stand-ins for the compiled package's classes."""
    root = os.path.join(TE_SRC, "transformer_engine", "pytorch")
    path = os.path.join(root, "custom_recipes", "reference_nvfp4.py")
    if not os.path.isfile(path):
        raise CheckFailed("TE's reference_nvfp4.py not found at %s (run scripts/consumers-env.sh)" % path)

    class Quantizer:  # transformer_engine.pytorch.quantized_tensor.Quantizer's usage flags
        def __init__(self, rowwise=True, columnwise=True):
            self.rowwise_usage = rowwise
            self.columnwise_usage = columnwise

    stubs = {
        "transformer_engine": types.ModuleType("transformer_engine"),
        "transformer_engine.pytorch": types.ModuleType("transformer_engine.pytorch"),
        "transformer_engine.pytorch.custom_recipes": types.ModuleType("transformer_engine.pytorch.custom_recipes"),
        "transformer_engine.pytorch.quantized_tensor": types.ModuleType("transformer_engine.pytorch.quantized_tensor"),
        "transformer_engine.pytorch.tensor": types.ModuleType("transformer_engine.pytorch.tensor"),
        "transformer_engine.pytorch.tensor.utils": types.ModuleType("transformer_engine.pytorch.tensor.utils"),
    }
    stubs["transformer_engine.pytorch.quantized_tensor"].Quantizer = Quantizer
    stubs["transformer_engine.pytorch.quantized_tensor"].QuantizedTensorStorage = type("QuantizedTensorStorage", (), {})
    stubs["transformer_engine.pytorch.tensor.utils"].is_custom = lambda *a, **k: True
    sys.modules.update(stubs)
    loaded = {}
    for name in ("reference_utils", "gemm", "reference_nvfp4"):
        full = "transformer_engine.pytorch.custom_recipes." + name
        spec = importlib.util.spec_from_file_location(full, os.path.join(root, "custom_recipes", name + ".py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[full] = mod
        setattr(stubs["transformer_engine.pytorch.custom_recipes"], name, mod)
        spec.loader.exec_module(mod)
        loaded[name] = mod
    return loaded["reference_nvfp4"], loaded["reference_utils"]


def tensors():
    """{name: BF16 [rows, cols]}: lognormal magnitudes with outliers; one with a 2^20 outlier
    that sends most blocks' E4M3 scales to zero or subnormals; one of exact E2M1 ties."""
    g = torch.Generator().manual_seed(39)
    out = {}

    def lognormal(rows, cols, spread):
        x = torch.randn(rows, cols, generator=g) * torch.exp(spread * torch.randn(rows, cols, generator=g))
        return x

    x = lognormal(64, 96, 1.5)
    x[3, 7] *= 4096
    out["l0"] = (x, lognormal(48, 96, 0.5) * 0.02)
    y = lognormal(32, 64, 1.0)
    y[0, 0] = 2.0 ** 20
    out["l1"] = (y, lognormal(32, 64, 2.0))
    # Multiples of 0.25 up to 6 with a block amax of 6: every E2M1 tie (0.25, 0.75, ..., 5) met.
    ties = (torch.randint(-24, 25, (48, 32), generator=g).float() * 0.25)
    ties[:, ::16] = 6.0
    out["l2"] = (ties, ties.t().contiguous()[:, :32].repeat(1, 1))
    # Blocks whose scales part TE 2.8-2.13's rule, e4m3(fp32(amax / 6) * S_enc), from TE 2.14+'s,
    # e4m3(amax * fp32(S_enc * fp32(1/6))): under a tensor amax of 73, the 14 BF16 block amaxes
    # 0.85546875 * 2^k (k = -7..6) land the two FP32 products on either side of an E4M3 tie (found
    # by trying every BF16 value from 2^-8 to 128).
    split = [0.85546875 * 2.0 ** k for k in range(-7, 7)]
    blocks = torch.zeros(32, 16)  # [16, 32]: two blocks a row
    for i, amax_b in enumerate((split * 3)[:32]):
        blocks[i] = (torch.rand(16, generator=g) * 2 - 1) * amax_b
        blocks[i, i % 16] = amax_b if i % 2 else -amax_b
    part = blocks.reshape(-1, 32)
    part[0, 31] = 73.0
    out["l3"] = (part, lognormal(16, 32, 1.0))
    return {k: (a.bfloat16(), w.bfloat16()) for k, (a, w) in out.items()}


def write_capture(path, named):
    fp8a_safetensors.write_safetensors(
        path, {name: ("BF16", list(t.shape), t.contiguous().view(torch.int16).numpy().tobytes())
               for name, t in named.items()}, {"step": "1"})


def f32(v):
    return np.float32(v)


def decoded(ref, utils, x, tile, columnwise, rht):
    """The copy as TE's reference quantises it, decoded: (values [rows, cols] float32 in the
    tensor's own layout and domain, amax, [block scale * decode] float32)."""
    q = ref.NVFP4QuantizerRef(dtype=utils.Fp4Formats.E2M1, rowwise=not columnwise, columnwise=columnwise,
                              quant_tile_shape=tile, with_rht=rht)
    qx, sx, qx_t, sx_t, amax_row, amax_col = q._quantize(x)
    data, scale, amax = (qx_t, sx_t, amax_col) if columnwise else (qx, sx, amax_row)
    amax = float(amax.reshape(-1)[0])
    codes = ref.cast_from_fp4x2(data, torch.float64).numpy()
    rows, cols = codes.shape
    block_scale = scale.to(torch.float32).double().numpy()[:rows, : cols // 16]
    decode = float(f32(amax / 2688.0))
    units = (block_scale * decode).astype(np.float32)
    values = (codes * np.repeat(block_scale, 16, axis=1) * decode).astype(np.float32)
    if columnwise and not rht:
        values = values.T
    elif columnwise:  # [cols of x, rows of x], transformed along its rows: undo it, exactly, in double
        h = np.array([[(-1) ** bin(i & j).count("1") for j in range(16)] for i in range(16)], dtype=np.float64)
        y = values.astype(np.float64).reshape(rows, cols // 16, 16)
        back = np.zeros_like(y)
        for j in range(16):
            acc = np.zeros(y.shape[:2])
            for i in range(16):
                acc = acc + y[:, :, i] * h[i, j]
            back[:, :, j] = acc * 0.25 * SIGNS[j]
        values = back.reshape(rows, cols).astype(np.float32).T
    return values, amax, units


def check(argv):
    if len(argv) != 1:
        raise CheckFailed("usage: check_te_nvfp4.py FP8_ADVISOR_BINARY")
    ref, utils = te_reference()
    named = tensors()
    compared = 0
    with tempfile.TemporaryDirectory() as tmp:
        capture = {}
        for layer, (x, w) in named.items():
            capture[layer + ".activation"] = x
            capture[layer + ".weight"] = w
        write_capture(os.path.join(tmp, "step_000001.safetensors"), capture)
        out = os.path.join(tmp, "out")
        args = ["run", "--capture", tmp, "--out", out, "--recipes", "nvfp4,nvfp4:no_rht,nvfp4:no_2d", "--cost", "none"]
        run = subprocess.run([argv[0]] + args, capture_output=True, text=True)
        if run.returncode != 0:
            raise CheckFailed("fp8-advisor run failed: %s" % (run.stderr.strip().splitlines() or ["?"])[-1])
        with open(os.path.join(out, "metrics.csv"), newline="") as f:
            rows = {(r["recipe"], r["layer"], r["tensor"], r["orientation"]): r for r in csv.DictReader(f)}
    # (recipe, role, TE's tile, columnwise, the transform): every copy the reference makes.
    copies = [("nvfp4", "activation", (1, 16), False, False), ("nvfp4", "activation", (1, 16), True, True),
              ("nvfp4", "weight", (16, 16), False, False), ("nvfp4:no_rht", "activation", (1, 16), True, False),
              ("nvfp4:no_2d", "weight", (1, 16), False, False), ("nvfp4:no_2d", "weight", (1, 16), True, False)]
    for layer, (x, w) in named.items():
        for recipe, role, tile, columnwise, rht in copies:
            t = x if role == "activation" else w
            key = (recipe, layer, role, "columnwise" if columnwise else "rowwise")
            if key not in rows:
                raise CheckFailed("metrics.csv has no nvfp4 row for %s" % (key,))
            r = rows[key]
            if r["dtype"] != "e2m1":
                raise CheckFailed("%s: dtype %r, not e2m1" % (key, r["dtype"]))
            values, amax, units = decoded(ref, utils, t, tile, columnwise, rht)
            xs = t.float().numpy()
            err = (xs.astype(np.float64) - values.astype(np.float64)) ** 2
            mse = err.sum() / xs.size
            underflow = int(((xs != 0) & (values == 0)).sum())
            s_enc = f32(min(f32(2688.0) / f32(amax), np.finfo(np.float32).max)) if amax > 0 else f32(1.0)
            want = {"scale": s_enc, "scale_inv": f32(amax / 2688.0),
                    "scale_inv_min": units.min(), "scale_inv_max": units.max()}
            for col, v in want.items():
                if f32(float(r[col])) != v:
                    raise CheckFailed("%s %s: metrics.csv %s %s, TE's reference %r" % (key, col, col, r[col], float(v)))
            if int(r["underflow_count"]) != underflow:
                raise CheckFailed("%s: underflow_count %s, TE's reference %d" % (key, r["underflow_count"], underflow))
            if abs(float(r["mse"]) - mse) > MSE_REL_TOL * mse:
                raise CheckFailed("%s: mse %s, TE's reference %r" % (key, r["mse"], mse))
            compared += 1
    return ("%d NVFP4 copies (1x16 both ways, with and without the Hadamard transform, 16x16) equal TE's "
            "NVFP4QuantizerRef in metrics.csv" % compared)


if __name__ == "__main__":
    sys.exit(main(check))
