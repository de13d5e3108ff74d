#!/usr/bin/env python3
"""The instruction mix of the per-tensor CUDA metric kernel and the floors it implies, without a GPU.

Compiles cuda/metrics_per_tensor.cu for sm_90 (nvcc), disassembles it (cuobjdump + nvdisasm), takes
the loop body that evaluates one E4M3 candidate on one 16-byte vector of 8 BF16 elements in the
8-candidate kernel (what K = 8 runs), counts its SASS instructions by opcode, and prints, for
K = 1, 8, 32 candidates on N BF16 elements:
  - the bandwidth floor: bytes the passes must read (statistics pass + one metrics pass per group
    of 8 candidates) over the device-to-device copy bandwidth;
  - the issue floor: instructions over the SMs' issue rate (4 schedulers x 32 lanes per clock);
  - the conversion floor: F2F/F2FP instructions over 16 per SM per clock (the CUDA programming
    guide's rate for type conversions on compute capability 9.0).
Per-element work outside the candidate body (loads, the shared x/float64/bit forms, the loop) and
the statistics pass are estimated from the same listing (instructions per element of the
statistics kernel's vector loop are not separated out: PASS1_INSTR below is an estimate).

The CUDA toolkit on the development machines has no cuobjdump/nvdisasm; PyPI has them:
    pip download --no-deps nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
    (unzip both wheels; put nvidia/cu13/bin on PATH)

    python3 bench/sass_floor.py [--elements N] [--sms 132] [--clock-ghz 1.98] [--copy-tbs 4.2]
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GROUP = 8            # kGroupSize in cuda/metric_jobs.hpp
VEC = 8              # BF16 elements per 16-byte load
PASS1_INSTR = 12     # statistics pass, instructions per element (estimate)
CONVERSIONS = ("F2F", "F2FP", "I2F", "F2I")


def disassemble(nvcc):
    with tempfile.TemporaryDirectory() as d:
        cubin = os.path.join(d, "k.cubin")
        subprocess.run([nvcc, "-DFP8A_CUDA_MIN_ARCH=90", "-I" + ROOT, "-O3", "-DNDEBUG", "-arch=sm_90",
                        "-std=c++20", "-cubin", os.path.join(ROOT, "cuda/metrics_per_tensor.cu"), "-o", cubin],
                       check=True)
        return subprocess.run(["cuobjdump", "-sass", cubin], check=True, capture_output=True,
                              text=True).stdout


def blocks_of(sass, function_part):
    start = sass.index(function_part)
    end = sass.find("Function :", start + 10)
    body = sass[start:end if end > 0 else len(sass)]
    ins = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[0-9T] )?([A-Z0-9_.]+)[^;]*;", body)
    blocks, cur = [], []
    for op in ins:
        cur.append(op)
        if op.startswith("BRA") or op.startswith("EXIT"):
            blocks.append(cur)
            cur = []
    return blocks + [cur]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nvcc", default="/usr/local/cuda/bin/nvcc")
    ap.add_argument("--elements", type=int, default=268435456)
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--clock-ghz", type=float, default=1.98)
    ap.add_argument("--copy-tbs", type=float, default=4.2, help="device-to-device copy bandwidth, TB/s")
    a = ap.parse_args()
    sass = disassemble(a.nvcc)
    # The BF16 (DType 0), 8-candidate kernel; the E4M3 body holds VEC/2 pair conversions.
    blocks = [b for b in blocks_of(sass, "metrics_per_tensor_kernelILNS_5DTypeE0ELi8EE")
              if sum(op.startswith("F2FP.SATFINITE.E4M3") for op in b) == VEC // 2]
    if not blocks:
        sys.exit("sass_floor: no E4M3 candidate body found")
    body = blocks[0]
    per = len(body) / VEC
    conv = sum(op.split(".")[0] in CONVERSIONS for op in body) / VEC
    mix = collections.Counter(op.split(".")[0] for op in body)
    print("per-tensor E4M3 candidate body, BF16, 8-candidate kernel: %d SASS instructions per %d elements"
          % (len(body), VEC))
    print("  per element and candidate: %.2f instructions, %.2f conversions (F2F/F2FP)" % (per, conv))
    print("  mix:", ", ".join("%s %d" % kv for kv in mix.most_common()))
    issue = a.sms * 4 * 32 * a.clock_ghz * 1e9      # thread-instructions per second
    conv_rate = a.sms * 16 * a.clock_ghz * 1e9      # conversions per second
    n = a.elements
    print("floors for N = %d BF16 elements, %d SMs at %.2f GHz, copy %.1f TB/s:" % (n, a.sms, a.clock_ghz, a.copy_tbs))
    print("  K  groups  bytes_read  bandwidth_ms  issue_ms  conversion_ms  floor_ms")
    for k in (1, 8, 32):
        groups = -(-k // GROUP)
        bytes_read = (1 + groups) * 2 * n
        bw = bytes_read / (a.copy_tbs * 1e12) * 1e3
        shared = 6  # per element per group: xc, float64, bits, loop (estimate from the listing)
        instr = n * (PASS1_INSTR + groups * shared + k * per)
        iss = instr / issue * 1e3
        cv = n * (groups * 1 + k * conv) / conv_rate * 1e3
        print("  %-2d %-7d %-11.3e %-13.3f %-9.3f %-14.3f %.3f" % (k, groups, bytes_read, bw, iss, cv, max(bw, iss, cv)))


if __name__ == "__main__":
    main()
