#!/usr/bin/env python3
"""A synthetic nvdlfw_inspect statistics log in TE's line format, for the statistics-only run's
benchmark (issue 59 part 4): STEPS steps x LAYERS Megatron layers (qkv, proj, fc1, fc2 cycling) x 3
tensors, per tensor and step LogTensorStats' cur_amax, mean, std and LogFp8TensorStats'
underflows% and mse of fp8_current_scaling, fp8_block_scaling and mxfp8 (the last two with their
_columnwise copies): 13 lines. Values are deterministic (a linear congruence), not a model's.
Usage: make_te_stats_log.py STEPS LAYERS OUT [--every N]"""
import sys

MODULES = ("self_attention.linear_qkv", "self_attention.linear_proj", "mlp.linear_fc1", "mlp.linear_fc2")


def main():
    steps, layers, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    every = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--every" else 1
    seed = 12345
    names = ["decoder.layers.%d.%s" % (i // 4, MODULES[i % 4]) for i in range(layers)]
    with open(out, "w", buffering=1 << 22) as f:
        for step in range(0, steps * every, every):
            it = "%06d" % step
            lines = []
            for name in names:
                for t in ("activation", "weight", "gradient"):
                    seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
                    u = (seed % 1000) / 1000.0
                    p = "%s_%s_" % (name, t)
                    tail = " \t\t\t\t iteration=" + it + " \t\t\t\t value="
                    lines.append(p + "cur_amax" + tail + repr(1.0 + 10 * u) + "\n")
                    lines.append(p + "mean" + tail + repr(u * 0.01) + "\n")
                    lines.append(p + "std" + tail + repr(0.5 + u) + "\n")
                    for r, cols in (("fp8_current_scaling", ("",)), ("fp8_block_scaling", ("", "_columnwise")),
                                    ("mxfp8", ("", "_columnwise"))):
                        for c in cols:
                            lines.append(p + r + "_underflows%" + c + tail + repr(u * 3) + "\n")
                            lines.append(p + r + "_mse" + c + tail + repr(1e-4 * (1 + u)) + "\n")
            f.writelines(lines)


if __name__ == "__main__":
    main()
