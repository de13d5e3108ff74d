#!/usr/bin/env python3
"""Corrupts a capture's files at random and checks that `fp8-advisor run` fails cleanly on each:
exit status 0, 2 or 3 (never a signal, a hang or another status), on failure exactly one line on
stderr and no output files. Each iteration copies the capture, damages one file (header bytes,
truncation, bytes anywhere, the safetensors header length; a comma in a CSV/JSON), and runs it.

  python3 scripts/fuzz_capture.py --binary build/cli/fp8-advisor --capture datasets/sample \\
      --iterations 1500 --seed 2

Prints each problem (and keeps the damaged file in the work directory); exit status 1 if any.
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile


def damage(data, is_safetensors, rng):
    kind = rng.randrange(4)
    if kind == 0:  # bytes in the header region
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(min(len(data), 4096))] = rng.randrange(256)
    elif kind == 1:  # truncated
        del data[rng.randrange(len(data)):]
    elif kind == 2:  # bytes anywhere
        for _ in range(rng.randint(1, 16)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif is_safetensors:  # the 8-byte header length: random, or near the file's size
        value = rng.randrange(1 << 64) if rng.random() < 0.5 else max(len(data) + rng.randint(-20, 20), 0)
        data[0:8] = value.to_bytes(8, "little")
    else:
        data[:] = bytes(data).replace(b",", b";", 1)
    return kind


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--capture", required=True)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    files = sorted(f for f in os.listdir(args.capture) if f.endswith((".safetensors", ".csv", ".json")))
    traces = [f for f in files if f.startswith("amax_trace") and f.endswith(".csv")]
    work = tempfile.mkdtemp(prefix="fp8a-fuzz-")
    problems = 0
    for it in range(args.iterations):
        cap, out = os.path.join(work, "capture"), os.path.join(work, "out")
        shutil.rmtree(cap, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(args.capture, cap)
        name = rng.choice(files)
        path = os.path.join(cap, name)
        data = bytearray(open(path, "rb").read())
        kind = damage(data, name.endswith(".safetensors"), rng)
        with open(path, "wb") as f:
            f.write(bytes(data))
        cmd = [args.binary, "run", "--capture", cap, "--out", out]
        if traces and rng.random() < 0.5:
            cmd += ["--amax-trace", os.path.join(cap, traces[0])]
        try:
            p = subprocess.run(cmd, capture_output=True, timeout=120)
        except subprocess.TimeoutExpired:
            problem, err = "hang (over 120 s)", ""
        else:
            err = p.stderr.decode(errors="replace")
            lines = [l for l in err.splitlines() if l.strip()]
            problem = None
            if p.returncode < 0:
                problem = "signal %d" % -p.returncode
            elif p.returncode not in (0, 2, 3):
                problem = "exit status %d" % p.returncode
            elif p.returncode != 0 and len(lines) != 1:
                problem = "%d lines on stderr" % len(lines)
            elif p.returncode != 0 and os.path.isdir(out) and os.listdir(out):
                problem = "output left behind: %s" % sorted(os.listdir(out))
        if problem:
            problems += 1
            kept = os.path.join(work, "problem_%d_%s" % (it, name))
            shutil.copy(path, kept)
            print("PROBLEM iteration %d, %s damaged (kind %d): %s; %s; kept %s"
                  % (it, name, kind, problem, err[:300].replace("\n", " | "), kept))
    print("fuzz_capture: %d iterations on %s, %d problems" % (args.iterations, args.capture, problems))
    if not problems:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
