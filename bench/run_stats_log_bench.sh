#!/bin/sh
# The statistics-only run (run --training-log, no capture) on synthetic TE logs of STEPS x LAYERS
# (bench/make_te_stats_log.py), against a plain Python reader of the same log (bench/peer_stats_log.py):
# wall time and peak memory of each. Usage: run_stats_log_bench.sh FP8_ADVISOR WORKDIR "STEPSxLAYERS ..."
set -eu
bin=$1 work=$2 sizes=${3:-"100x32 1000x32"}
here=$(dirname "$0")
mkdir -p "$work"
for size in $sizes; do
  steps=${size%x*} layers=${size#*x}
  log="$work/stats_${size}.log"
  python3 "$here/make_te_stats_log.py" "$steps" "$layers" "$log"
  echo "== $size: $(wc -c < "$log") bytes, $(wc -l < "$log") lines"
  rm -rf "$work/out"
  /usr/bin/time -f "fp8-advisor: %e s, %M kB peak" "$bin" run --training-log "$log" --out "$work/out" --quiet > /dev/null
  /usr/bin/time -f "peer (python): %e s, %M kB peak" python3 "$here/peer_stats_log.py" "$log" > /dev/null
  rm -f "$log"
done
