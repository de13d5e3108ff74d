#!/usr/bin/env bash
# `run` over 1 and 2 MPI ranks against 1 process with 1 and 2 threads (issue 16, "Many machines"):
# wall seconds of each, ROUNDS rounds interleaved, on a synth capture (7 layers x 16 steps, default
# recipes and formats, GEMMs on), and whether the 2-rank files are the 1-process ones.
#
#   bash bench/run_mpi_bench.sh [BUILD_DIR]      (default: build-rel; needs FP8A_WITH_MPI on)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build-rel}/cli/fp8-advisor
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" synth --preset all --steps "$(seq -s, 10 10 160)" --out "$work/cap" >/dev/null
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $("$bin" --version | tail -1)"
timed() {
  local name=$1; shift
  local t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || { echo "$name FAILED"; return 1; }
  printf '%-28s %6.2f s\n' "$name" "$(echo "$(date +%s.%N) - $t0" | bc)"
}
for round in $(seq "${ROUNDS:-3}"); do
  echo "round $round, load $(cut -d' ' -f1-3 /proc/loadavg)"
  for d in a b c; do rm -rf "$work/$d"; done
  # The same --out for all three (moved away), so every file compares byte for byte.
  timed "1 process, --threads 1" "$bin" run --threads 1 --capture "$work/cap" --out "$work/out" --quiet
  mv "$work/out" "$work/a"
  timed "1 process, --threads 2" "$bin" run --threads 2 --capture "$work/cap" --out "$work/out" --quiet
  mv "$work/out" "$work/b"
  timed "mpirun -n 2, --threads 1" mpirun --bind-to none -n 2 "$bin" run --threads 1 --capture "$work/cap" --out "$work/out" --quiet
  mv "$work/out" "$work/c"
done
for f in metrics.csv gemms.csv recipe.json megatron_args.txt report.md; do
  cmp -s "$work/a/$f" "$work/c/$f" && echo "same $f (1 process vs 2 ranks)" || echo "DIFFERENT $f"
done
