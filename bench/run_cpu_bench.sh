#!/usr/bin/env bash
# CPU metric-pass benchmark: fp8-advisor's CPU backend against the NumPy + ml_dtypes peer on the
# same 16M-element BF16 tensor, K = 1 and 8 candidates, both in this one run; per core for each
# CPU code path (baseline SSE2, x86-64-v3 AVX2, x86-64-v4 AVX-512) the CPU runs.
#
#   [ROUNDS=3] bash bench/run_cpu_bench.sh [BUILD_DIR]      (default: build; ROUNDS default 1)
#
# Needs a configured build; installs numpy and ml_dtypes into a throw-away venv under /tmp for the
# peer. The tensor is written by the system's python3, which needs numpy and torch (Debian's
# python3-torch): make_bench_tensor.py uses the capture hook's safetensors writer.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
ninja -C "$build" bench_cpu_metrics >/dev/null
venv=/tmp/fp8a-bench-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q numpy ml_dtypes
fi
tensor=/tmp/fp8a-bench-16m.safetensors
[ -f "$tensor" ] || python3 bench/make_bench_tensor.py "$tensor"
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# numpy $("$venv/bin/python" -c 'import numpy; print(numpy.__version__)'), ml_dtypes $("$venv/bin/python" -c 'import ml_dtypes; print(ml_dtypes.__version__)')"
echo "# $(uptime)"
"$build/bench/bench_cpu_metrics" "$tensor" --candidates 1,8 --repeat 5
# Per core, each CPU code path this CPU runs (FP8A_CPU_ISA, engine/cpu_isa.hpp) and the peer,
# alternated over ROUNDS rounds (other jobs on a shared machine then hit each alike; take medians).
for round in $(seq "${ROUNDS:-1}"); do
  echo "# round $round: $(uptime)"
  for isa in baseline v3 v4; do
    FP8A_CPU_ISA=$isa "$build/bench/bench_cpu_metrics" "$tensor" --candidates 1,8 --repeat 5 --threads 1 ||
      echo "path $isa: not run (this CPU lacks it)"
  done
  "$venv/bin/python" tests/peers/peer_numpy.py "$tensor" --candidates 1,8 --repeat 3
done
echo "# $(uptime)"

# Full default recipe set on the same tensor: the metric pass alone (every recipe in each
# orientation TE quantises an activation in), then both tools end to end on the file (read,
# decode, every recipe but delayed, which needs a history; write CSV), timed the same way.
"$build/bench/bench_cpu_metrics" "$tensor" --recipes all --repeat 3
recipes=current,current:pow2,block,block:fp32,mxfp8,mxfp8:floor,bf16
out=$(mktemp -d)
t0=$(date +%s.%N)
"$build/cli/fp8-advisor" run --capture "$tensor" --out "$out/fp8a" --recipes "$recipes" --format e4m3 --no-gemms >/dev/null
t1=$(date +%s.%N)
"$venv/bin/python" tests/peers/peer_numpy.py "$tensor" --all --format e4m3 --recipes "$recipes" --csv "$out/peer.csv" 2>/dev/null
t2=$(date +%s.%N)
echo "end-to-end, 7 recipes (11 evaluations with orientations), 16M BF16 elements:"
echo "  fp8-advisor run: $(echo "$t1 - $t0" | bc) s"
echo "  peer_numpy --all: $(echo "$t2 - $t1" | bc) s"
rm -rf "$out"
