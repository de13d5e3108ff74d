#!/usr/bin/env python3
"""Writes the small, deterministic sample capture in datasets/sample/.

Standard library only (no numpy), so it runs on any Python 3.8+.

Output (all paths relative to --out, default datasets/sample next to this repository's root):
  step_000100.safetensors, step_000200.safetensors
      Two captures of the GEMM operands of a toy 2-layer transformer (hidden 128, 64 tokens,
      ffn 256). Every tensor is BF16 and named "<layer>.<role>", role in activation|weight|gradient.
  manifest.json
      Per (file, tensor): name, step, dtype, shape, amax (max |x| of the stored BF16 values),
      number of exact zeros, and what the tensor is meant to show; "amax_trace" describes the trace.
  amax_trace.csv
      "step,tensor,amax": the amax of every tensor at every step 0..200, so that delayed scaling
      (TE DelayedScaling, scale from the amaxes of earlier steps) can be replayed exactly. At the
      captured steps (100, 200) the amax is exactly the captured tensor's; in between a smooth
      geometric series with small multiplicative noise (see amax_trace_rows).
  README.md
      Short description and the command to regenerate.

Content (random.Random seeded per tensor from sha256("<name>@<step>"), so every tensor is
reproducible on its own and the output is byte-identical on every run and Python version):
  * weights:      N(0, 0.02)
  * activations:  N(0, 1); layers.1.mlp.linear_fc2.activation additionally has 4 outlier
                  channels (columns 7, 61, 130, 201) multiplied by 60 at step 100 and by 200
                  at step 200 (outlier growth over training steps)
  * gradients:    sign * 1e-5 * exp(N(0, 2.5)) (lognormal magnitude, random sign), a dynamic
                  range so wide that per-tensor E4M3 scaling flushes a visible share to zero;
                  in layers.0.mlp.linear_fc2.gradient exactly 3% of the elements (246 of 8192,
                  positions drawn from the same generator) are set to exact +0.
Values are float64 samples rounded to float32 (struct 'f', round to nearest) and then to BF16
with round-to-nearest-even on the float32 bit pattern.

Regenerate:  python3 scripts/make_sample_capture.py
"""

import argparse
import hashlib
import json
import math
import os
import random
import struct
import sys

GENERATOR = "scripts/make_sample_capture.py"
STEPS = (100, 200)
HIDDEN = 128
TOKENS = 64
FFN = 256

OUTLIER_COLUMNS = (7, 61, 130, 201)
OUTLIER_GAIN = {100: 60.0, 200: 200.0}
ZERO_FRACTION = 0.03

TRACE_FILE = "amax_trace.csv"
TRACE_STEPS = 201  # steps 0..200 inclusive
# Per role: (amax at step 0 as a multiple of the step-100 amax, sigma of the multiplicative noise).
TRACE_START = {"weight": (0.95, 0.005), "activation": (1.0, 0.02), "gradient": (3.0, 0.05)}
# The FC2 outlier activation grows steadily from 1/8 of its step-100 amax (little noise, so the
# growth is monotone): the delayed-scaling pathology, the amax history lags the growth.
TRACE_OUTLIER_START = (0.125, 0.002)

QKV = "self_attention.linear_qkv"
FC2 = "mlp.linear_fc2"

# (layer, role, shape, description). Order = order in the JSON header and in the data buffer.
def tensor_specs():
    specs = []
    for layer_idx in (0, 1):
        qkv = "layers.%d.%s" % (layer_idx, QKV)
        fc2 = "layers.%d.%s" % (layer_idx, FC2)
        specs.append((qkv, "activation", [2, TOKENS // 2, HIDDEN],
                      "QKV input, N(0,1), 3-D [batch, seq, hidden] on purpose"))
        specs.append((qkv, "weight", [3 * HIDDEN, HIDDEN], "QKV weight, N(0,0.02)"))
        specs.append((qkv, "gradient", [2, TOKENS // 2, 3 * HIDDEN],
                      "QKV output gradient, lognormal magnitude 1e-5*exp(N(0,2.5)): "
                      "wide dynamic range, E4M3 underflow"))
        if layer_idx == 1:
            act_desc = ("FC2 input, N(0,1) with 4 outlier channels (columns %s) x%g at step 100, "
                        "x%g at step 200: outlier growth"
                        % (",".join(str(c) for c in OUTLIER_COLUMNS), OUTLIER_GAIN[100],
                           OUTLIER_GAIN[200]))
        else:
            act_desc = "FC2 input, N(0,1), no outliers (baseline)"
        specs.append((fc2, "activation", [TOKENS, FFN], act_desc))
        specs.append((fc2, "weight", [HIDDEN, FFN], "FC2 weight, N(0,0.02)"))
        if layer_idx == 0:
            grad_desc = ("FC2 output gradient, lognormal magnitude 1e-5*exp(N(0,2.5)) with "
                         "exactly 3% exact zeros (zeros must not count as underflow)")
        else:
            grad_desc = ("FC2 output gradient, lognormal magnitude 1e-5*exp(N(0,2.5)): "
                         "wide dynamic range, E4M3 underflow")
        specs.append((fc2, "gradient", [TOKENS, HIDDEN], grad_desc))
    return specs


def seed_for(name, step):
    digest = hashlib.sha256(("%s@%d" % (name, step)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little")


def numel_of(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def generate(layer, role, shape, step):
    """Returns a list of Python floats (float64 samples, not yet rounded)."""
    name = "%s.%s" % (layer, role)
    rng = random.Random(seed_for(name, step))
    n = numel_of(shape)
    if role == "weight":
        return [rng.gauss(0.0, 0.02) for _ in range(n)]
    if role == "activation":
        vals = [rng.gauss(0.0, 1.0) for _ in range(n)]
        if name == "layers.1.%s.activation" % FC2:
            cols = shape[-1]
            gain = OUTLIER_GAIN[step]
            for i in range(n):
                if i % cols in OUTLIER_COLUMNS:
                    vals[i] *= gain
        return vals
    # gradient
    vals = []
    for _ in range(n):
        sign = -1.0 if rng.random() < 0.5 else 1.0
        vals.append(sign * 1e-5 * math.exp(rng.gauss(0.0, 2.5)))
    if name == "layers.0.%s.gradient" % FC2:
        n_zero = int(round(ZERO_FRACTION * n))
        for i in rng.sample(range(n), n_zero):
            vals[i] = 0.0
    return vals


def float_to_bf16_bits(x):
    """float -> float32 (round to nearest) -> bf16 bits, round-to-nearest-even on the fp32 bits."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


def bf16_bits_to_float(b):
    return struct.unpack("<f", struct.pack("<I", b << 16))[0]


def to_float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def amax_trace_rows(captured_amax):
    """captured_amax: {(name, step): amax} for the captured steps. Returns [(step, name, amax)].

    Per tensor (random.Random seeded from sha256("<name>@amax_trace")): a geometric interpolation
    from a0 (step 0) to the captured amax at step 100, then to the captured amax at step 200, times
    exp(sigma * N(0, 1)) at every step but 100 and 200, rounded to float32. At steps 100 and 200
    the value is exactly the captured tensor's amax.
    """
    names = ["%s.%s" % (layer, role) for layer, role, _, _ in tensor_specs()]
    series = {}
    for name in names:
        role = name.rpartition(".")[2]
        a100, a200 = captured_amax[(name, 100)], captured_amax[(name, 200)]
        start, sigma = TRACE_START[role]
        if name == "layers.1.%s.activation" % FC2:
            start, sigma = TRACE_OUTLIER_START
        a0 = start * a100
        digest = hashlib.sha256(("%s@amax_trace" % name).encode("utf-8")).digest()
        rng = random.Random(int.from_bytes(digest[:8], "little"))
        vals = []
        for t in range(TRACE_STEPS):
            noise = math.exp(sigma * rng.gauss(0.0, 1.0))  # drawn at every step: stable stream
            if t in (100, 200):
                vals.append(captured_amax[(name, t)])
                continue
            if t < 100:
                trend = a0 * (a100 / a0) ** (t / 100.0)
            else:
                trend = a100 * (a200 / a100) ** ((t - 100) / 100.0)
            vals.append(to_float32(trend * noise))
        series[name] = vals
    return [(t, name, series[name][t]) for t in range(TRACE_STEPS) for name in names]


def write_amax_trace(path, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("step,tensor,amax\n")
        for step, name, amax in rows:
            f.write("%d,%s,%r\n" % (step, name, amax))


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, shape, bf16 bits list). Writes a valid safetensors file."""
    header = {"__metadata__": metadata}
    buf = bytearray()
    for name, shape, bits in tensors:
        begin = len(buf)
        buf += struct.pack("<%dH" % len(bits), *bits)
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [begin, len(buf)]}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((-len(hjson)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        f.write(bytes(buf))


def main(argv=None):
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(repo, "datasets", "sample"),
                    help="output folder (default: datasets/sample)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)

    manifest = {
        "generator": GENERATOR,
        "regenerate": "python3 %s" % GENERATOR,
        "amax_definition": "max |x| over the stored BF16 values",
        "tensors": [],
    }
    captured_amax = {}
    for step in STEPS:
        fname = "step_%06d.safetensors" % step
        tensors = []
        for layer, role, shape, desc in tensor_specs():
            name = "%s.%s" % (layer, role)
            bits = [float_to_bf16_bits(v) for v in generate(layer, role, shape, step)]
            stored = [bf16_bits_to_float(b) for b in bits]
            tensors.append((name, shape, bits))
            captured_amax[(name, step)] = max(abs(v) for v in stored)
            manifest["tensors"].append({
                "file": fname,
                "name": name,
                "step": step,
                "dtype": "BF16",
                "shape": shape,
                "amax": max(abs(v) for v in stored),
                "zeros": sum(1 for v in stored if v == 0.0),
                "description": desc,
            })
        metadata = {
            "step": str(step),
            "generator": GENERATOR,
            "description": ("fp8-advisor sample capture: GEMM operands (activation, weight, "
                            "gradient) of 2 layers of a toy transformer, hidden 128, tokens 64, "
                            "ffn 256; synthetic data, see datasets/sample/README.md"),
        }
        write_safetensors(os.path.join(args.out, fname), tensors, metadata)

    write_amax_trace(os.path.join(args.out, TRACE_FILE), amax_trace_rows(captured_amax))
    manifest["amax_trace"] = {
        "file": TRACE_FILE,
        "columns": ["step", "tensor", "amax"],
        "steps": [0, TRACE_STEPS - 1],
        "tensors": len(tensor_specs()),
        "rows": TRACE_STEPS * len(tensor_specs()),
        "description": ("amax of every tensor at every step 0..200 (float32 values); at steps 100 "
                        "and 200 exactly the captured tensor's amax, elsewhere a geometric "
                        "interpolation (step 0 -> 100 -> 200) with small multiplicative noise; "
                        "layers.1.mlp.linear_fc2.activation grows steadily (outlier growth) so that "
                        "delayed scaling's amax history lags it. Lets delayed scaling be "
                        "replayed exactly: fp8-advisor run --amax-trace amax_trace.csv"),
    }

    with open(os.path.join(args.out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "README.md"), "w", encoding="utf-8") as f:
        f.write(README)
    return 0


README = """# Sample capture

Small synthetic capture of the GEMM operands of a toy 2-layer transformer (hidden 128,
64 tokens, ffn 256), used by tests and examples. Synthetic data, deterministic, no model involved.

| file | content |
| --- | --- |
| `step_000100.safetensors`, `step_000200.safetensors` | 12 BF16 tensors each, named `<layer>.<role>` |
| `manifest.json` | per tensor: step, dtype, shape, amax (max abs of the stored BF16 values), exact zeros, what it shows; `amax_trace`: what the trace holds |
| `amax_trace.csv` | `step,tensor,amax`: the amax of each of the 12 tensors at every step 0..200 |

Layers: `layers.{0,1}.self_attention.linear_qkv` (activation [2,32,128], weight [384,128],
gradient [2,32,384]) and `layers.{0,1}.mlp.linear_fc2` (activation [64,256], weight [128,256],
gradient [64,128]). `__metadata__` holds `step`, `generator` and `description` (strings).

Content (`random.Random` seeded per tensor from sha256 of `<name>@<step>`):

- weights: N(0, 0.02)
- activations: N(0, 1); `layers.1.mlp.linear_fc2.activation` has 4 outlier channels
  (columns 7, 61, 130, 201) scaled x60 at step 100 and x200 at step 200 (outlier growth)
- gradients: `sign * 1e-5 * exp(N(0, 2.5))`, a wide dynamic range, so per-tensor E4M3 scaling
  flushes a visible share to zero; `layers.0.mlp.linear_fc2.gradient` has exactly 3% exact zeros

Floats are rounded to float32, then to BF16 with round-to-nearest-even.

Amax trace (`amax_trace.csv`, for replaying delayed scaling exactly, e.g.
`fp8-advisor run --capture datasets/sample --amax-trace datasets/sample/amax_trace.csv`): at steps
100 and 200 each amax is exactly the captured tensor's (the manifest value); in between a geometric
interpolation from a start value (step 0) to the step-100 amax and on to the step-200 amax, times
small multiplicative noise (`exp(sigma*N(0,1))`, sigma 0.5% weights, 2% activations, 5% gradients;
start 0.95x, 1x, 3x the step-100 amax), rounded to float32 and written with `repr()`.
`layers.1.mlp.linear_fc2.activation` grows steadily from 1/8 of its step-100 amax (sigma 0.2%, so
monotone): delayed scaling's history lags the growth and the top outliers overflow.

Regenerate (standard library only, byte-identical output):

    python3 scripts/make_sample_capture.py
"""

if __name__ == "__main__":
    sys.exit(main())
