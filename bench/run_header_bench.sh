#!/usr/bin/env bash
# Safetensors header parse time against its number of entries (issue 25): `fp8-advisor inspect`
# on files of 10k, 20k and 100k one-element tensors, and in the same rounds the peers parsing the
# same headers: Python's json.loads of the header bytes, and the safetensors package's
# deserialize (Rust, serde_json) when it is installed. Linear time: 100k entries under 2 s.
#
#   [ROUNDS=3] [BIN=path/to/fp8-advisor] bash bench/run_header_bench.sh [BUILD_DIR]   (default: build)
#
# Needs python3 (standard library; `pip install safetensors` for the second peer). The files are
# written once to /tmp/fp8a-wide-N.safetensors by bench/make_wide_header.py.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin=${BIN:-$build/cli/fp8-advisor}
[ -n "${BIN:-}" ] || ninja -C "$build" fp8-advisor >/dev/null
sizes=${SIZES:-"10000 20000 100000"}
for n in $sizes; do
  f=/tmp/fp8a-wide-$n.safetensors
  [ -f "$f" ] || python3 bench/make_wide_header.py "$f" "$n"
done
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# $bin; python $(python3 -c 'import sys; print(sys.version.split()[0])'), safetensors $(python3 -c 'import safetensors; print(safetensors.__version__)' 2>/dev/null || echo 'not installed')"
for round in $(seq "${ROUNDS:-1}"); do
  echo "# round $round: $(uptime)"
  for n in $sizes; do
    f=/tmp/fp8a-wide-$n.safetensors
    t0=$(date +%s.%N)
    "$bin" inspect "$f" | tail -1 | grep -q "^$n tensors in 1 file(s): valid$"
    t1=$(date +%s.%N)
    echo "entries $n fp8-advisor-inspect $(echo "$t1 - $t0" | bc) s"
    python3 - "$f" "$n" <<'PY'
import json, struct, sys, time
path, n = sys.argv[1], int(sys.argv[2])
b = open(path, "rb").read()
size = struct.unpack("<Q", b[:8])[0]
t = time.perf_counter()
h = json.loads(b[8:8 + size])
print(f"entries {n} python-json.loads {time.perf_counter() - t:.3f} s")
assert len(h) == n + 1
try:
    import safetensors
except ImportError:
    sys.exit(0)
t = time.perf_counter()
d = safetensors.deserialize(b)
print(f"entries {n} safetensors-deserialize {time.perf_counter() - t:.3f} s")
assert len(d) == n
PY
  done
done
