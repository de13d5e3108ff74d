#!/usr/bin/env python3
"""Writes the torch.save fixtures of tests/golden/torch/ (read by tests/datasets/test_torch_zip.cpp).

Needs a real PyTorch (any 2.x; the checked-in files were written by the version named in
manifest.json). It is used here only, to produce the fixtures; fp8-advisor never links libtorch.

    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch
    /tmp/torchvenv/bin/python scripts/make_torch_fixtures.py [out_dir]

Every file but legacy.pt is deterministic (fixed values, no random generator; torch.save's
serialization_id is a hash of the contents); the legacy format names its storages by memory
address, so legacy.pt changes from run to run (only its first bytes matter to the tests). manifest.json lists, per readable file, the tensors fp8-advisor must
return (key, dtype, shape, every value as a float) and the entries it must skip.

Transformer Engine DumpTensors (transformer_engine/debug/features/dump_tensors.py, TensorLogger
.save_tensor / DumpTensors.inspect_tensor) writes one torch.save per (layer, tensor, iteration) to
    {log_dir}/tensor_dumps/rank_{rank}/iter_{iteration:06d}/{layer}_{tensor}.pt
in every release (TE 2.15+); the fixtures below keep the name of the pull request's earlier
revision, {layer}_{tensor}_iter_{iteration:06d}.pt, which fp8-advisor also reads
(tests/datasets/test_capture.cpp loads the same bytes at the released path). Layer and tensor
names have / \\ : * ? " < > | space and '.' replaced by '_'. Each file holds a dict
{"high_precision": tensor, "quantized": QuantizedTensor}. The quantized value is TE's
QuantizedTensor subclass pickled through its __reduce_ex__, e.g. for Float8Tensor
(Float8Tensor._make_in_reduce_ex, (self._data, self._fp8_dtype, self._scale_inv, self.dtype)).
Transformer Engine cannot be installed here (it needs CUDA), so the Float8Tensor and the
transformer_engine_torch.DType enum are emulated below with plain classes registered under TE's
module names: pickle writes the same opcodes and globals for them as for the real classes
(GLOBAL '__builtin__ getattr' applied to the class and '_make_in_reduce_ex', the uint8 data
tensor, the DType through NEWOBJ + BUILD, the float32 scale_inv tensor, the torch dtype).
"""

import collections
import io
import json
import os
import pathlib
import struct
import sys
import types
import zipfile

import torch

OUT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                   pathlib.Path(__file__).resolve().parent.parent / "tests/golden/torch")

DTYPE_NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def ramp(n, dtype, start=-1.0, step=0.125):
    """n exactly representable values start, start + step, ... (all exact in bf16/f16/f32)."""
    return (torch.arange(n, dtype=torch.float64) * step + start).to(dtype)


def expect(key, t):
    """Manifest entry for a tensor fp8-advisor returns."""
    flat = t.contiguous().reshape(-1).to(torch.float64).tolist()
    return {"key": key, "dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape), "values": flat}


manifest = {"torch_version": torch.__version__, "files": []}


def save(rel, obj, tensors, skipped=(), **kwargs):
    path = OUT / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(obj, path, **kwargs)
    manifest["files"].append({"file": rel, "tensors": tensors, "skipped": list(skipped)})


# ---- emulated Transformer Engine classes (see the module docstring) ------------------------------
def _module(name):
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    return mod


for _name in ("transformer_engine", "transformer_engine.pytorch", "transformer_engine.pytorch.tensor"):
    _module(_name)
_tex = _module("transformer_engine_torch")
_f8mod = _module("transformer_engine.pytorch.tensor.float8_tensor")


class DType:
    """Stands in for the pybind11 enum transformer_engine_torch.DType (pickled by its int state)."""

    def __init__(self, value):
        self.value = value

    def __getstate__(self):
        return self.value

    def __setstate__(self, state):
        self.value = state


DType.__module__ = "transformer_engine_torch"
_tex.DType = DType
kFloat8E4M3 = DType(7)  # NVTEDType::kNVTEFloat8E4M3


class Float8Tensor:
    """Stands in for transformer_engine.pytorch.tensor.float8_tensor.Float8Tensor."""

    def __init__(self, data, fp8_dtype, fp8_scale_inv, dtype):
        self._data, self._fp8_dtype, self._scale_inv, self.dtype = data, fp8_dtype, fp8_scale_inv, dtype

    @classmethod
    def _make_in_reduce_ex(cls, data, fp8_dtype, fp8_scale_inv, dtype):
        return cls(data, fp8_dtype, fp8_scale_inv, dtype)

    def __reduce_ex__(self, protocol):
        # As TE's Float8Tensor.__reduce_ex__.
        return (Float8Tensor._make_in_reduce_ex,
                (self._data, self._fp8_dtype, self._scale_inv, self.dtype))


Float8Tensor.__module__ = "transformer_engine.pytorch.tensor.float8_tensor"
_f8mod.Float8Tensor = Float8Tensor


def te_quantize(hp, scale):
    """Per-tensor FP8 E4M3 quantisation as TE stores it: uint8 data and a float32 scale_inv."""
    data = (hp.to(torch.float32) * scale).to(torch.float8_e4m3fn).view(torch.uint8)
    return Float8Tensor(data, kFloat8E4M3, torch.tensor([1.0 / scale], dtype=torch.float32),
                        hp.dtype)


# ---- readable files -----------------------------------------------------------------------------
OUT.mkdir(parents=True, exist_ok=True)

t = ramp(12, torch.float32).reshape(3, 4)
save("bare_f32.pt", t, [expect("", t)])

t = ramp(32, torch.bfloat16, start=-2.0, step=0.25).reshape(4, 8)
save("bf16.pt", t, [expect("", t)])

t = ramp(24, torch.float16, start=-3.0, step=0.375).reshape(2, 3, 4)
save("f16_3d.pt", t, [expect("", t)])

# A TE DumpTensors file at the path TE writes (layer "layers.0.fc1", tensor "activation",
# iteration 10, rank 0; '.' sanitised to '_' as in TE main).
hp = ramp(128, torch.bfloat16, start=-4.0, step=0.0625).reshape(8, 16)
save("tensor_dumps/rank_0/layers_0_fc1_activation_iter_000010.pt",
     {"high_precision": hp, "quantized": te_quantize(hp, 64.0)},
     [expect("high_precision", hp)],
     ["quantized: transformer_engine.pytorch.tensor.float8_tensor.Float8Tensor"])

# The variant with dump_quantized_internals (a newer DumpTensors revision): the Float8Tensor plus
# its raw FP8 data viewed as float8_e4m3fn and its float32 scale_inv.
hp = ramp(64, torch.bfloat16, start=-2.0, step=0.0625).reshape(4, 16)
q = te_quantize(hp, 32.0)
save("tensor_dumps/rank_0/layers_0_fc2_activation_iter_000020.pt",
     {"high_precision": hp, "quantized": q, "data": q._data.view(torch.float8_e4m3fn),
      "scale_inv": q._scale_inv},
     [expect("high_precision", hp), expect("scale_inv", q._scale_inv)],
     ["quantized: transformer_engine.pytorch.tensor.float8_tensor.Float8Tensor",
      "data: float8_e4m3fn"])

# The same dict shape with a plain torch float8 tensor and an int leaf.
hp = ramp(16, torch.bfloat16, start=-1.0, step=0.125).reshape(2, 8)
save("dict_plain_fp8.pt",
     {"high_precision": hp, "quantized": hp.to(torch.float8_e4m3fn), "step": 7},
     [expect("high_precision", hp)], ["quantized: float8_e4m3fn"])

# t[1:] of a larger storage: storage_offset 6 into a 24-element storage.
big = ramp(24, torch.float32).reshape(4, 6)
t = big[1:]
assert t.storage_offset() == 6
save("storage_offset.pt", t, [expect("", t)])

od = collections.OrderedDict()
od["w"] = ramp(4, torch.float32, start=0.5).reshape(2, 2)
od["b"] = ramp(3, torch.float16, start=-0.5)
od["meta"] = {"inner": ramp(2, torch.bfloat16, start=8.0)}
save("ordered_dict.pt", od,
     [expect("w", od["w"]), expect("b", od["b"]), expect("meta.inner", od["meta"]["inner"])])

# Nested containers, non-tensor leaves, shared storages, a scalar, an empty tensor, a parameter,
# and int64 / bool tensors (skipped).
base = ramp(10, torch.float32, start=100.0, step=1.0)
scalar = torch.tensor(3.5, dtype=torch.float32)
empty = torch.zeros(0, 4, dtype=torch.float16)
param = torch.nn.Parameter(ramp(6, torch.float32, start=-0.75, step=0.25).reshape(2, 3))
nested = {
    "layers": [{"act": base[:4]}, {"act": base[4:].reshape(2, 3)}],
    "pair": (scalar, empty),
    "param": param,
    "ids": torch.arange(3, dtype=torch.int64),
    "mask": torch.tensor([True, False]),
    "name": "fc1",
    "scale": 1.5,
    "flag": True,
    "nothing": None,
    "big": 12345678901234,
    7: ramp(2, torch.float32, start=7.0),
}
save("nested.pt", nested,
     [expect("layers.0.act", base[:4]), expect("layers.1.act", base[4:].reshape(2, 3)),
      expect("pair.0", scalar), expect("pair.1", empty),
      expect("param", param.detach()), expect("7", nested[7])],
     ["ids: int64", "mask: bool"])

# Pickle protocol 4 (FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL).
t = ramp(6, torch.bfloat16, start=0.25).reshape(3, 2)
save("protocol4.pt", {"x": t}, [expect("x", t)], pickle_protocol=4)

# A plain tensor with a Python attribute: torch._tensor._rebuild_from_type_v2.
t = ramp(5, torch.float32, start=2.0)
t.note = "attribute"
save("tensor_with_attr.pt", t, [expect("", t)])

# ---- refused files ------------------------------------------------------------------------------
# Non-contiguous view saved as-is: shape [3, 2], strides [1, 3].
t = ramp(6, torch.float32).reshape(2, 3).t()
assert not t.is_contiguous()
torch.save(t, OUT / "non_contiguous.pt")

# Only a float8 tensor: nothing fp8-advisor evaluates.
torch.save({"q": ramp(4, torch.float32).to(torch.float8_e5m2)}, OUT / "only_fp8.pt")

# Legacy (pre-1.6) serialisation: a bare pickle stream, not a zip.
torch.save(ramp(4, torch.float32), OUT / "legacy.pt", _use_new_zipfile_serialization=False)


def write_zip(path, members):
    """A torch.save-like archive written with Python's zipfile (stored members)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        for name, data in members:
            z.writestr(zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0)), data)


def pickle_bytes(*parts):
    return b"".join(parts)


def binunicode(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


# data.pkl calling os.system('echo pwned') through GLOBAL + REDUCE. Built from opcodes; never
# unpickled by this script.
evil = pickle_bytes(b"\x80\x02", b"cos\nsystem\n", b"q\x00", binunicode("echo pwned"),
                    b"\x85", b"R", b"q\x01", b".")
write_zip(OUT / "malicious_os_system.pt",
          [("archive/data.pkl", evil), ("archive/byteorder", b"little"), ("archive/version", b"3\n")])

# The same archive layout with a deflate-compressed data.pkl.
with zipfile.ZipFile(OUT / "compressed.pt", "w") as z:
    info = zipfile.ZipInfo("archive/data.pkl", date_time=(2024, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, pickle_bytes(b"\x80\x02", b"N", b"."))

(OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
print(f"wrote {len(list(OUT.rglob('*.pt')))} .pt files and manifest.json to {OUT}, {total} bytes")
