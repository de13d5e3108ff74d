#!/usr/bin/env python3
"""The harness's FP8 emulation (fp8emu.py) against fp8-advisor's codec, on real captures: for
every captured tensor, recipe (current, delayed, block, mxfp8, nvfp4 and its three switches, bf16),
format (e4m3, hybrid) and
operand copy (rowwise, columnwise) (in a harness run's folder: the recipe and format it trained with), fp8emu's quantise-dequantise must give exactly the numbers
`fp8-advisor run` writes to metrics.csv: the scale bits (per-tensor scale; the block scales'
scale_inv_min/max), underflow_count, overflow_count and saturated_count, and mse to 1e-12 relative,
or n * 2^-53 for n elements where that is larger (the dequantised values agree bit for bit; only
the float64 sum of the same terms is added in another order); NVFP4
adds the level-2 decode factor (scale_inv) and its stochastic rounding draws fp8-advisor's stream. Delayed
scaling: the scale of fp8emu.DelayedScale fed the amax trace step by step is the scale fp8-advisor
replays from that trace, and, where the harness wrote the scales it trained with
(delayed_scales.csv), those as well.

  PY calibration/test_codec.py BINARY CAPTURE_DIR [CAPTURE_DIR ...]

A capture written here with partial blocks on every side is checked after the given ones.

PY needs PyTorch with float8 dtypes (>= 2.1); exit 77 (skip) without it. Exit 1 on a mismatch.
"""

import csv
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
    if not hasattr(torch, "float8_e4m3fn"):
        raise ImportError("torch %s has no float8 dtypes" % torch.__version__)
except ImportError as e:
    print("test_codec skipped: %s" % e)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "python")]
import fp8emu  # noqa: E402
import fp8a_safetensors  # noqa: E402

MSE_REL_TOL = 1e-12
# Both sides add the same float64 terms in different orders; a sum of n positive terms in float64
# is exact to n * 2^-53 relative (fp8-advisor's is one chain in index order, the bound's worst
# case), which passes 1e-12 past about 9,000 elements: the d_model 256 captures' 131,072 do.
def mse_tolerance(n):
    return max(MSE_REL_TOL, 2.0 * n * 2.0 ** -53)
DTYPES = {"BF16": torch.bfloat16, "F32": torch.float32, "F16": torch.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        b, t = e["data_offsets"]
        raw = bytearray(blob[8 + n + b: 8 + n + t])
        out[name] = torch.frombuffer(raw, dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
    return int(meta["step"]), out


def read_trace(path):
    """{tensor name: [amax of step 0, 1, ...]} (steps contiguous from 0)."""
    series = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            s = series.setdefault(r["tensor"], [])
            if int(r["step"]) != len(s):
                raise ValueError("%s: %s steps not contiguous" % (path, r["tensor"]))
            s.append(float(r["amax"]))
    return series


_REPLAYED = {}


def delayed_scales(recipe, fmt, series, role):
    """fp8emu.DelayedScale over a trace series: the scale used at every step."""
    key = (recipe.spec, fmt, role, tuple(series))
    if key not in _REPLAYED:
        _REPLAYED[key] = _replay(recipe, fmt, series, role)
    return _REPLAYED[key]


def _replay(recipe, fmt, series, role):
    d = fp8emu.DelayedScale(recipe, fp8emu.FP8[fp8emu.role_dtype(fmt, role)][1])
    used = []
    for a in series:
        used.append(float(d.scale))
        d.observe(torch.tensor([a], dtype=torch.float32))
        d.end_step()
    return used


def f32_bits(v):
    """The float32 bits of v, as 0x%08x with the value."""
    b = struct.pack("<f", float(v))
    return "0x%08x (%.9g)" % (struct.unpack("<I", b)[0], struct.unpack("<f", b)[0])


def check_dir(binary, cap_dir, tmp):
    trace_path = os.path.join(cap_dir, "amax_trace_rank0.csv")
    trace = read_trace(trace_path)
    harness_scales = {}
    hs_path = os.path.join(cap_dir, "delayed_scales.csv")
    if os.path.exists(hs_path):
        with open(hs_path, newline="") as f:
            for r in csv.DictReader(f):
                harness_scales[(int(r["step"]), r["tensor"])] = float(r["scale"])
    # A harness run's folder (config.json): the recipe and format it trained with; otherwise
    # every recipe in both formats.
    trained, formats = None, ("e4m3", "hybrid")
    recipes = [fp8emu.Recipe(r) for r in ("delayed", "current", "block", "mxfp8", "nvfp4",
                                          "nvfp4:no_rht:no_sr:no_2d", "bf16")]
    cfg_path = os.path.join(cap_dir, "config.json")
    if os.path.exists(cfg_path):
        with open(cfg_path) as f:
            cfg = json.load(f)
        recipes, formats = [fp8emu.Recipe(cfg["recipe"])], (cfg["format"],)
        trained = recipes[0].spec
    tensors = {}
    for name in sorted(os.listdir(cap_dir)):
        if name.endswith(".safetensors"):
            step, ts = read_safetensors(os.path.join(cap_dir, name))
            for t, x in ts.items():
                tensors[(step, t)] = x
    checked, trained_checked, bad = 0, 0, []
    for fmt in formats:
        out = os.path.join(tmp, os.path.basename(cap_dir.rstrip("/")) + "-" + fmt)
        subprocess.run([binary, "run", "--capture", cap_dir, "--training-log", trace_path,
                        "--recipes", ",".join(r.spec for r in recipes), "--format", fmt,
                        "--no-gemms", "--device", "cpu", "--threads", "1", "--cost", "none",
                        "--quiet", "--out", out], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(out, "metrics.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        by_recipe = {r.spec: r for r in recipes}
        for row in rows:
            recipe = by_recipe[row["recipe"]]
            step, tname = int(row["step"]), row["layer"] + "." + row["tensor"]
            role, orient = row["tensor"], row["orientation"]
            x = tensors[(step, tname)]
            dtype = fp8emu.role_dtype(fmt, role)
            scale = None
            want = []
            if recipe.kind == "delayed":
                s = delayed_scales(recipe, fmt, trace[tname], role)[step]
                scale = torch.tensor(s, dtype=torch.float32)
                want.append(("scale (trace replay)", f32_bits(s), f32_bits(row["scale"])))
                if recipe.spec == trained and (step, tname) in harness_scales:
                    hs = harness_scales[(step, tname)]
                    trained_checked += 1
                    want.append(("scale (trained)", f32_bits(hs), f32_bits(row["scale"])))
            q = fp8emu.quantize(x, recipe, dtype, role, orient, scale)
            mse, under = fp8emu.error_sums(x, q)
            if recipe.per_tensor or recipe.kind == "nvfp4":
                want.append(("scale", f32_bits(q.scale), f32_bits(row["scale"])))
            if recipe.kind == "nvfp4":
                want.append(("scale_inv", f32_bits(q.scale_inv), f32_bits(row["scale_inv"])))
            if recipe.kind != "bf16":
                want += [("scale_inv_min", f32_bits(q.sinv_min), f32_bits(row["scale_inv_min"])),
                         ("scale_inv_max", f32_bits(q.sinv_max), f32_bits(row["scale_inv_max"]))]
            want += [("underflow_count", under, int(row["underflow_count"])),
                     ("overflow_count", q.overflow, int(row["overflow_count"])),
                     ("saturated_count", q.saturated, int(row["saturated_count"]))]
            ref_mse = float(row["mse"])
            rel = abs(mse - ref_mse) / ref_mse if ref_mse else abs(mse)
            tol = mse_tolerance(x.numel())
            want.append(("mse (rel %.2g, tolerance %.2g)" % (rel, tol), rel <= tol, True))
            checked += 1
            for what, got, exp in want:
                if got != exp:
                    bad.append("%s step %d %s %s %s %s: %s harness %r, fp8-advisor %r"
                               % (cap_dir, step, tname, recipe.spec, fmt, orient, what, got, exp))
    return checked, trained_checked, bad


def write_edge_capture(path):
    """A capture of two layers whose shapes leave partial blocks: `odd` (37 tokens, 50 in, 21 out:
    every block and tile of the FP8 recipes ends short; MXFP8 and NVFP4 need multiples of 32 and
    16 and skip it) and `sixteen` (48 tokens, 80 in, 48 out: NVFP4's blocks, tiles and transform
    fit, MXFP8's and 1x128 blocks do not), each with an outlier in X, a 2^20 outlier in dY (NVFP4
    block scales of zero and E4M3 subnormals), an all-zero token and -0.0: steps 0 and 1 in the
    trace, step 1 captured."""
    g = torch.Generator().manual_seed(23)

    def lognormal(rows, cols, spread):
        return torch.randn(rows, cols, generator=g) * torch.exp(spread * torch.randn(rows, cols, generator=g))

    named = {}
    for layer, (tokens, d_in, d_out) in (("odd", (37, 50, 21)), ("sixteen", (48, 80, 48))):
        x = lognormal(tokens, d_in, 1.5)
        x[5, 9] *= 3000.0
        x[tokens - 1] = 0.0
        x[0, 0] = -0.0
        gy = lognormal(tokens, d_out, 2.0) * 1e-4
        gy[2, 3] = 2.0 ** 20
        named.update({"edge.%s.activation" % layer: x,
                      "edge.%s.weight" % layer: lognormal(d_out, d_in, 0.5) * 0.02,
                      "edge.%s.gradient" % layer: gy})
    os.makedirs(path)
    fp8a_safetensors.write_safetensors(
        os.path.join(path, "rank0_step_000001.safetensors"),
        {name: ("BF16", list(t.shape), t.bfloat16().contiguous().view(torch.int16).numpy().tobytes())
         for name, t in named.items()}, {"step": "1"})
    with open(os.path.join(path, "amax_trace_rank0.csv"), "w") as f:
        f.write("step,tensor,amax\n")
        for step in (0, 1):
            for name, t in named.items():
                f.write("%d,%s,%r\n" % (step, name, float(t.bfloat16().float().abs().max()) / (2 - step)))
    return path


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    binary, dirs = argv[1], argv[2:]
    total, bad = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for d in dirs + [write_edge_capture(os.path.join(tmp, "edge-shapes"))]:
            n, nt, b = check_dir(binary, d, tmp)
            total += n
            bad += b
            print("%s: %d metrics rows checked (%d delayed scales as the harness trained), "
                  "%d mismatches" % (d, n, nt, len(b)))
    for line in bad[:20]:
        print("MISMATCH " + line)
    print("test_codec: %d rows, %d mismatches" % (total, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
