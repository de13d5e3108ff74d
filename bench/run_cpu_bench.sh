#!/usr/bin/env bash
# CPU metric-pass benchmark: fp8-advisor's CPU backend against the NumPy + ml_dtypes peer on the
# same 16M-element BF16 tensor, K = 1 and 8 candidates, both in this one run.
#
#   bash bench/run_cpu_bench.sh [BUILD_DIR]      (default: build)
#
# Needs a configured build; installs numpy and ml_dtypes into a throw-away venv under /tmp.
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
[ -f "$tensor" ] || "$venv/bin/python" bench/make_bench_tensor.py "$tensor"
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# numpy $("$venv/bin/python" -c 'import numpy; print(numpy.__version__)'), ml_dtypes $("$venv/bin/python" -c 'import ml_dtypes; print(ml_dtypes.__version__)')"
"$build/bench/bench_cpu_metrics" "$tensor" --candidates 1,8 --repeat 5
"$build/bench/bench_cpu_metrics" "$tensor" --candidates 1,8 --repeat 5 --threads 1
"$venv/bin/python" bench/peer_numpy.py "$tensor" --candidates 1,8 --repeat 3
