#!/usr/bin/env python3
"""Writes a safetensors file with a wide header: ENTRIES tensors of one F32 element each.

    python3 make_wide_header.py OUT.safetensors ENTRIES

Names are <layer>.<role> (layers.<i // 3>.fc1.<activation|weight|gradient>), so `inspect` and
`run` take every entry; the header is ~90 bytes an entry (100,000 entries: ~9 MB). Standard
library only. Used by bench/run_header_bench.sh.
"""

import json
import struct
import sys

ROLES = ("activation", "weight", "gradient")


def main(argv):
    out, entries = argv[1], int(argv[2])
    header = {"__metadata__": {"step": "1"}}
    for i in range(entries):
        header[f"layers.{i // 3}.fc1.{ROLES[i % 3]}"] = {
            "dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(b"".join(struct.pack("<f", 1.0 + (i % 7)) for i in range(entries)))


if __name__ == "__main__":
    main(sys.argv)
