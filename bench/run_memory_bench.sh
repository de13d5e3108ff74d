#!/usr/bin/env bash
# Peak resident memory of `fp8-advisor run` against the capture's size (bench/RESULTS.md).
#
#   bench/run_memory_bench.sh SIZE_GB WORK_DIR BINARY [BINARY ...] -- [run options ...]
#
# Writes a BF16 capture of SIZE_GB (bench/make_memory_capture.py: X/W/dY per layer and step,
# 4 steps, two layers a file) under WORK_DIR/capture_<SIZE>GB, runs each BINARY's `run` on it
# under /usr/bin/time -v with the options after --, prints one line per binary (capture bytes,
# files, peak RSS, wall time, exit status), and deletes the capture and the outputs. Needs
# python3 with numpy, and WORK_DIR with SIZE_GB free.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 SIZE_GB WORK_DIR BINARY [BINARY ...] -- [run options]" >&2; exit 2; }
size=$1 work=$2
shift 2
binaries=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do binaries+=("$1"); shift; done
[ $# -gt 0 ] && shift
here=$(cd "$(dirname "$0")" && pwd)
capture="$work/capture_${size}GB"
trap 'rm -rf "$capture" "$work"/out_memory_bench_*' EXIT
mkdir -p "$work"
t0=$(date +%s)
python3 "$here/make_memory_capture.py" "$capture" "$size"
echo "generated in $(( $(date +%s) - t0 )) s"
bytes=$(du -sb "$capture" | cut -f1)
files=$(find "$capture" -name '*.safetensors' | wc -l)
i=0
for bin in "${binaries[@]}"; do
  i=$((i + 1))
  out="$work/out_memory_bench_$i"
  log="$work/time_memory_bench_$i.txt"
  echo "uptime before: $(uptime)"
  rc=0
  /usr/bin/time -v "$bin" run --capture "$capture" --out "$out" --quiet "$@" \
      > "$work/stdout_memory_bench_$i.txt" 2> "$log" || rc=$?
  rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$log")
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$log")
  rows=$( [ -f "$out/metrics.csv" ] && echo $(( $(wc -l < "$out/metrics.csv") - 1 )) || echo 0)
  timings=$( [ -f "$out/summary.json" ] && python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["timings_s"]; print("read=%.1fs evaluate=%.1fs gemms=%.1fs" % (t["read"], t["evaluate"], t["gemms"]))' "$out/summary.json" || echo "timings=none")
  printf 'size=%sGB bytes=%s files=%s binary=%s peak_rss_MiB=%.0f wall=%s %s metrics_rows=%s rc=%s\n' \
      "$size" "$bytes" "$files" "$bin" "$(echo "$rss_kb / 1024" | bc -l)" "$wall" "$timings" "$rows" "$rc"
  echo "uptime after: $(uptime)"
  [ "$rc" = 0 ] || tail -5 "$log"
  rm -rf "$out"
done
