#!/usr/bin/env python3
"""run_plan_agreement.py BINARY [--quick]: `fp8-advisor run` over every capture we can make, then
check_plan_agreement.py over all the outputs (issue 55's property test: each file trains, GEMM by
GEMM, what recipe.json and the answer say).

The captures: every synth preset (the model-shaped sample of the README too, unless --quick),
the shipped sample and the two real captures (datasets/), issue 55's four cases made here (a
capture without gradients; two ranks that are neither column-, row- nor data-parallel; a MoE
router 256 -> 4 and an LM head 256 -> 86; a layer TE's FP8 modules refuse, 100 -> 100), and
hostile layer names. Each under the default recipes, and some under one recipe kind or another
GPU (per-module mixing, torchao's recipes, NVFP4). Writes nothing outside a temporary folder."""
import os
import random
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def write_safetensors(path, tensors, meta=None):
    """tensors: name -> (dtype, shape, bytes), in order."""
    import json
    header, blob = {}, b""
    if meta:
        header["__metadata__"] = meta
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob)


def gaussian_bf16(n, scale, rng):
    return b"".join(struct.pack("<f", rng.gauss(0.0, scale))[2:4] for _ in range(n))


def add_layer(t, name, m, n, k, rng, grad_scale=1e-3, roles=("activation", "weight", "gradient")):
    shapes = {"activation": ([m, k], 1.0), "weight": ([n, k], 0.05), "gradient": ([m, n], grad_scale)}
    for role in roles:
        shape, scale = shapes[role]
        t["%s.%s" % (name, role)] = ("BF16", shape, gaussian_bf16(shape[0] * shape[1], scale, rng))


def make_cases(d):
    """Issue 55's cases as fresh captures; returns [(name, capture dir)]."""
    cases = []
    rng = random.Random(55)
    for step in (50, 100):  # 1. taken under torch.no_grad(): X and W only
        t = {}
        for name in ("layers.0.self_attention.linear_qkv", "layers.0.mlp.linear_fc1", "layers.0.mlp.linear_fc2"):
            add_layer(t, name, 128, 256, 256, rng, roles=("activation", "weight"))
        write_safetensors(os.path.join(d, "nograd", "step_%06d.safetensors" % step), t, {"step": str(step)})
    cases.append(("nograd", os.path.join(d, "nograd")))
    for rank in (0, 1):  # 2. two pipeline stages that both name their first layer layers.0
        r = random.Random(100 + rank)
        for step in (50, 100):
            t = {}
            add_layer(t, "layers.0.mlp.linear_fc1", 128, 256, 128, r)
            add_layer(t, "layers.0.mlp.linear_fc2", 128, 128, 256, r)
            write_safetensors(os.path.join(d, "tworank", "rank_%d" % rank, "step_%06d.safetensors" % step), t,
                              {"step": str(step)})
    cases.append(("tworank", os.path.join(d, "tworank")))
    for step in (50, 100):  # 4. a MoE router, an LM head and a layer TE refuses beside healthy ones
        t = {}
        add_layer(t, "layers.0.mlp.router", 128, 4, 256, rng, 1e-2)
        add_layer(t, "layers.0.mlp.linear_fc1", 128, 256, 256, rng)
        add_layer(t, "layers.0.mlp.linear_fc2", 128, 256, 256, rng)
        add_layer(t, "layers.1.self_attention.linear_proj", 128, 100, 100, rng)
        add_layer(t, "output_layer", 128, 86, 256, rng, 1e-2)
        write_safetensors(os.path.join(d, "oddshape", "step_%06d.safetensors" % step), t, {"step": str(step)})
    cases.append(("oddshape", os.path.join(d, "oddshape")))
    t = {}  # one 1e30 outlier in X (issue 56 item 2: threshold loads of inf in recipe.json)
    add_layer(t, "layers.0.mlp.linear_fc1", 64, 128, 128, rng)
    x = bytearray(t["layers.0.mlp.linear_fc1.activation"][2])
    x[0:2] = struct.pack("<f", 1e30)[2:4]
    t["layers.0.mlp.linear_fc1.activation"] = ("BF16", [64, 128], bytes(x))
    write_safetensors(os.path.join(d, "outlier", "step_000001.safetensors"), t)
    cases.append(("outlier", os.path.join(d, "outlier")))
    # Hostile names: YAML, regex and glob metacharacters, a line separator, a Megatron-like name,
    # a TE dump's name of a module Megatron does not name ('.' made '_', issue 56 item 3).
    for i, name in enumerate(["it's \"q\" [x] {y} #z", "a\u2028b: c", "layers.0.mlp.linear_fc1*?",
                              "decoder.layers.1.self_attention.linear_qkv.(x)",
                              "model_module_decoder_layers_2_my_mlp_linear_fc1"]):
        t = {}
        r = random.Random(i)
        add_layer(t, name, 32, 32, 64, r)
        # three in four X values far below FP8's range: fprop and wgrad fail, dgrad passes
        x = b"".join(struct.pack("<f", r.gauss(0, 1e-30 if j % 4 else 1e4))[2:4] for j in range(32 * 64))
        t[name + ".activation"] = ("BF16", [32, 64], x)
        write_safetensors(os.path.join(d, "name%d" % i, "step_000001.safetensors"), t)
        cases.append(("name%d" % i, os.path.join(d, "name%d" % i)))
    # A grouped module's expert captured with its weight alone (issue 56 item 7): not judged, and
    # trained as the files leave it.
    t = {}
    r = random.Random(6)
    add_layer(t, "decoder.layers.0.mlp.experts.linear_fc1.expert0", 64, 128, 128, r)
    add_layer(t, "decoder.layers.0.mlp.experts.linear_fc1.expert1", 64, 128, 128, r, roles=("weight",))
    add_layer(t, "decoder.layers.0.mlp.linear_fc2", 64, 128, 128, r)
    write_safetensors(os.path.join(d, "wexpert", "step_000001.safetensors"), t)
    cases.append(("wexpert", os.path.join(d, "wexpert")))
    # A top-level module named like a nested one's leaf (issue 56 item 8): nvdlfw's suffix pattern
    # for c_fc selects transformer.h.0.mlp.c_fc too, so the files give them one plan.
    t = {}
    r = random.Random(8)
    add_layer(t, "transformer.h.0.mlp.c_fc", 32, 32, 64, r)
    add_layer(t, "c_fc", 32, 32, 64, r)
    x = b"".join(struct.pack("<f", r.gauss(0, 1e-30 if j % 4 else 1e4))[2:4] for j in range(32 * 64))
    t["c_fc.activation"] = ("BF16", [32, 64], x)
    write_safetensors(os.path.join(d, "leaf", "step_000001.safetensors"), t)
    cases.append(("leaf", os.path.join(d, "leaf")))
    return cases


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    binary, quick = sys.argv[1], "--quick" in sys.argv[2:]
    with tempfile.TemporaryDirectory() as d:
        caps = make_cases(d)
        presets = ["healthy", "outlier-growth", "wide-gradient", "sensitive-ends", "all", "sample"]
        if not quick:
            presets.append("model")
        for p in presets:
            out = os.path.join(d, "synth-" + p)
            subprocess.run([binary, "synth", "--preset", p, "--out", out], check=True, stdout=subprocess.DEVNULL)
            caps.append(("synth-" + p, out))
        for real in ("sample", "real/lm-sane", "real/lm-spike"):
            caps.append((real.replace("/", "-"), os.path.join(ROOT, "datasets", real)))
        runs = []
        for name, cap in caps:
            variants = [("", [])]
            if name == "outlier":
                variants = [("", ["--recipes", "nvfp4,current,mxfp8", "--gpu", "b200"])]
            if name in ("synth-all", "synth-sample", "oddshape", "name0", "name4"):
                variants += [("-current", ["--recipes", "current"]), ("-block", ["--recipes", "block,current"]),
                             ("-b200", ["--gpu", "b200"])]
            for suffix, extra in variants:
                out = os.path.join(d, "out", name + suffix)
                log = [a for a in (os.path.join(cap, "amax_trace.csv"),) if os.path.isfile(a)]
                cmd = [binary, "run", "--capture", cap, "--out", out, "--quiet"] + extra
                if log:
                    cmd += ["--training-log", log[0]]
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
                if r.returncode != 0:
                    print("FAIL: %s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr.strip()[-300:]))
                    return 1
                runs.append(out)
        r = subprocess.run([sys.executable, os.path.join(HERE, "check_plan_agreement.py")] + runs,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        last = [l for l in r.stdout.splitlines() if l.startswith(("OK:", "FAIL:"))]
        print(last[-1] if last else r.stdout[-2000:])
        if r.returncode == 0:
            print("OK: %d runs agree file by file" % len(runs))
        return r.returncode


if __name__ == "__main__":
    sys.exit(main())
