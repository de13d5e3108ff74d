#!/usr/bin/env bash
# Issue 54's check of the sampled GEMM error: families a-g (bench/make_sampling_families.py) at
# 4096 tokens x 4096 -> 4096, each run with --gemm-rows auto and --gemm-rows 0, then the z table
# and the decisions compared (bench/sampling_z_table.py).
#   bash bench/run_sampling_bench.sh BINARY WORK_DIR [SEEDS] [FAMILIES]
# WORK_DIR/captures holds the captures (made when missing: needs numpy and ml_dtypes),
# WORK_DIR/auto and WORK_DIR/exact the runs, WORK_DIR/times.tsv each run's wall seconds and peak RSS.
set -euo pipefail
bin=$(realpath "$1")
work=$2
seeds=${3:-6}
families=${4:-abcdefg}
here=$(dirname "$0")
python=${PYTHON:-python3}
mkdir -p "$work/auto" "$work/exact"
[ -d "$work/captures" ] || "$python" "$here/make_sampling_families.py" "$work/captures" --families "$families" --seeds "$seeds"
: > "$work/times.tsv"
for cap in "$work"/captures/*/; do
  name=$(basename "$cap")
  for mode in auto exact; do
    rows=$([ "$mode" = auto ] && echo auto || echo 0)
    rm -rf "$work/$mode/$name"
    /usr/bin/time -f "%e %M" -o "$work/time.txt" "$bin" run --capture "$cap" --out "$work/$mode/$name" \
      --cost none --recipes current,block,mxfp8 --gemm-rows "$rows" --quiet > /dev/null
    printf '%s\t%s\t%s\n' "$name" "$mode" "$(cat "$work/time.txt")" >> "$work/times.tsv"
  done
done
python3 "$here/sampling_z_table.py" "$work/auto" "$work/exact" --markdown
