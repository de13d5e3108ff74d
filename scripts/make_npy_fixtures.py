#!/usr/bin/env python3
"""Writes the .npy/.npz fixtures of tests/datasets/test_npy.cpp into tests/golden/npy/.

Every file is written by NumPy itself (np.save, np.lib.format.write_array, np.savez,
np.savez_compressed); bfloat16 comes from ml_dtypes. expected.json records, per accepted fixture,
the descr and shape NumPy wrote (read back from the file with np.lib.format, not assumed) and the
first values as floats, so the C++ test can check values without NumPy.

Run from the repository root (needs numpy and ml_dtypes):

    python3 scripts/make_npy_fixtures.py [--out tests/golden/npy]

Output is deterministic: values are arithmetic sequences and the zip timestamps of the .npz
members are pinned to 1980-01-01 (zipfile would otherwise stamp the current time).
"""
import argparse
import io
import json
import os
import time
import zipfile
from unittest import mock

import ml_dtypes
import numpy as np

BF16 = ml_dtypes.bfloat16
MAX_VALUES = 16  # values recorded per array (C order)


def seq(n, dtype, start, step):
    """start, start+step, ... computed in float64, then rounded once to dtype."""
    return (start + step * np.arange(n, dtype=np.float64)).astype(dtype)


def header_of(raw):
    """(version, descr, fortran_order, shape) of .npy bytes, read back with NumPy."""
    f = io.BytesIO(raw)
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    else:
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    # The descr text exactly as written (dtype.str would turn ml_dtypes' '<V2' into '|V2').
    text = raw[: 12 + 64 * 4].decode("latin1")
    start = text.index("'descr': ") + len("'descr': ")
    quote = text[start]
    descr = text[start + 1 : text.index(quote, start + 1)]
    return version, descr, fortran, list(shape)


def values_of(arr):
    flat = np.ascontiguousarray(arr).reshape(-1)[:MAX_VALUES]
    if flat.dtype == np.uint16:
        flat = flat.view(BF16)
    return [float(v) for v in flat.astype(np.float64)]


def npy_bytes(arr, version=None, allow_pickle=False):
    f = io.BytesIO()
    if version is None:
        np.save(f, arr, allow_pickle=allow_pickle)
    else:
        np.lib.format.write_array(f, arr, version=version, allow_pickle=allow_pickle)
    return f.getvalue()


class _FixedTime:
    """Stands in for the time module inside zipfile so member timestamps are 1980-01-01."""

    @staticmethod
    def time():
        return 0.0

    @staticmethod
    def localtime(_=None):
        return time.struct_time((1980, 1, 1, 0, 0, 0, 1, 1, 0))


def npz_bytes(compressed, **arrays):
    f = io.BytesIO()
    with mock.patch.object(zipfile, "time", _FixedTime):
        (np.savez_compressed if compressed else np.savez)(f, **arrays)
    return f.getvalue()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join("tests", "golden", "npy"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    f32_2d = seq(12, np.float32, -1.5, 0.37).reshape(3, 4)
    f32_3d = seq(24, np.float32, 100.0, -8.125).reshape(2, 3, 4)
    # float16: ordinary values plus the largest finite half and the smallest subnormal.
    f16 = np.concatenate([seq(6, np.float16, 0.1, 0.2), np.array([65504.0, 2.0**-24], np.float16)])
    scalar = np.array(3.14159265, dtype=np.float32)
    empty = np.zeros((0, 4), np.float32)
    # bfloat16: rounded values, the largest finite bfloat16, a subnormal, a negative zero.
    bf16 = np.concatenate([seq(5, BF16, 1.0, 0.1), np.array([3.3895313892515355e38, 2.0**-133, -0.0], BF16)])
    bf16 = bf16.reshape(2, 4)

    accepted = {
        "f32_2d.npy": (npy_bytes(f32_2d), f32_2d, "none"),
        "f32_3d.npy": (npy_bytes(f32_3d), f32_3d, "none"),
        "f16.npy": (npy_bytes(f16), f16, "none"),
        "f32_scalar.npy": (npy_bytes(scalar), scalar, "none"),
        "f32_empty.npy": (npy_bytes(empty), empty, "none"),
        "bf16_void.npy": (npy_bytes(bf16), bf16, "bf16"),  # ml_dtypes: '<V2'
        "bf16_void_pipe.npy": (npy_bytes(bf16.view("V2")), bf16, "bf16"),  # plain void: '|V2'
        "bf16_u16.npy": (npy_bytes(bf16.view(np.uint16)), bf16, "bf16"),  # '<u2'
        "f32_v2.npy": (npy_bytes(f32_2d, version=(2, 0)), f32_2d, "none"),
        "f32_v3.npy": (npy_bytes(f32_2d, version=(3, 0)), f32_2d, "none"),
    }
    refused = {
        "f64.npy": npy_bytes(seq(4, np.float64, 0.5, 0.25)),
        "f32_big_endian.npy": npy_bytes(seq(4, ">f4", 0.5, 0.25)),
        "f32_fortran.npy": npy_bytes(np.asfortranarray(f32_2d[:2, :3])),
        "object.npy": npy_bytes(np.array([1, "two", None], dtype=object), allow_pickle=True),
        "i32.npy": npy_bytes(np.arange(4, dtype=np.int32)),
    }
    npz_arrays = {"weight": f32_2d, "bias": f16, "act": bf16}
    npz_raw = {"weight": "none", "bias": "none", "act": "bf16"}

    expected = {"accepted": {}, "refused": {}, "npz": {}}
    files = {}
    for name, (raw, arr, mode) in accepted.items():
        version, descr, fortran, shape = header_of(raw)
        assert not fortran
        expected["accepted"][name] = {
            "version": f"{version[0]}.{version[1]}",
            "descr": descr,
            "shape": shape,
            "npy_dtype": mode,
            "values": values_of(arr),
        }
        files[name] = raw
    for name, raw in refused.items():
        version, descr, fortran, shape = header_of(raw)
        expected["refused"][name] = {"descr": descr, "shape": shape, "fortran_order": fortran}
        files[name] = raw

    files["arrays.npz"] = npz_bytes(False, **npz_arrays)
    files["compressed.npz"] = npz_bytes(True, weight=f32_2d)
    for npz in ("arrays.npz", "compressed.npz"):
        with zipfile.ZipFile(io.BytesIO(files[npz])) as z:
            members = []
            for info in z.infolist():
                member = info.filename[: -len(".npy")]
                entry = {"zip_name": info.filename, "compress_type": info.compress_type,
                         "file_size": info.file_size}
                if info.compress_type == zipfile.ZIP_STORED:
                    _, descr, _, shape = header_of(z.read(info))
                    entry.update(name=member, descr=descr, shape=shape,
                                 npy_dtype=npz_raw[member], values=values_of(npz_arrays[member]))
                members.append(entry)
        expected["npz"][npz] = members

    # A capture in .npz form, for the capture loader's end-to-end test: members named
    # <layer>.<role>, the step in the file name. Values are exact in float32.
    files["capture_step_000300.npz"] = npz_bytes(
        False, **{"layers.0.fc1.activation": seq(32, np.float32, -2.0, 0.125).reshape(4, 8),
                  "layers.0.fc1.weight": seq(16, np.float32, 0.5, -0.0625).reshape(2, 8),
                  "layers.0.fc1.gradient": seq(8, np.float32, 1e-3, 2e-4).reshape(4, 2)})

    for name, raw in files.items():
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(raw)
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    total = sum(len(r) for r in files.values())
    print(f"wrote {len(files)} fixtures ({total} bytes) and expected.json to {args.out}")


if __name__ == "__main__":
    main()
