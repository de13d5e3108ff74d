"""fp8a_safetensors: the one safetensors writer of fp8-advisor's Python tools (standard library only).

    import fp8a_safetensors
    fp8a_safetensors.write_safetensors("step_000001.safetensors",
                                       {"layers.0.mlp.linear_fc1.activation": ("BF16", [4, 8], data)},
                                       {"step": "1"})

fp8a_capture writes its captures through it (torch tensors in); the benchmark generators in bench/
write NumPy arrays through it without torch.
"""

import json
import os
import sys

__all__ = ["write_safetensors", "DTYPE_SIZE"]

DTYPE_SIZE = {"F32": 4, "F16": 2, "BF16": 2}


def write_safetensors(path, tensors, metadata=None):
    """Write ``tensors`` (an ordered dict name -> (dtype, shape, data)) to ``path``.

    ``dtype`` is a key of DTYPE_SIZE, ``shape`` a sequence of ints, ``data`` a bytes-like object
    (anything with the buffer protocol: bytes, a C-contiguous NumPy array) holding the
    little-endian elements. The layout is the safetensors format: 8-byte little-endian header
    length, a JSON header (``__metadata__`` first, then the tensors in the order given, compact,
    padded with spaces to a multiple of 8 bytes, as the reference writer does), then each tensor's
    bytes in that order. ``metadata`` values must be strings. Written to ``path + ".tmp"`` and
    renamed, so a reader never sees a partial file.
    """
    if sys.byteorder != "little":
        raise RuntimeError("fp8a_safetensors writes little-endian safetensors: big-endian host")
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    offset = 0
    for name, (dtype, shape, data) in tensors.items():
        if dtype not in DTYPE_SIZE:
            raise TypeError("%s: dtype %s not supported (F32, F16, BF16)" % (name, dtype))
        view = memoryview(data).cast("B")
        numel = 1
        for d in shape:
            numel *= int(d)
        if view.nbytes != numel * DTYPE_SIZE[dtype]:
            raise ValueError("%s: %d bytes for shape %s of %s" % (name, view.nbytes, list(shape), dtype))
        header[name] = {
            "dtype": dtype,
            "shape": [int(d) for d in shape],
            "data_offsets": [offset, offset + view.nbytes],
        }
        blobs.append(view)
        offset += view.nbytes
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
