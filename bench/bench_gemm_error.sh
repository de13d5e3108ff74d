#!/usr/bin/env bash
# The GEMM-output error on real sizes (issue 16): `fp8-advisor run` with default options on
#   l4096: one 4096-wide layer, X, W, dY [4096, 4096] BF16, one step;
#   m32:   a 32-layer model, X, W, dY [1024, 1024] BF16 per layer, one step;
# written by bench/make_gemm_capture.py (numpy + ml_dtypes), then timed with /usr/bin/time.
#
#   bench/bench_gemm_error.sh BINARY OUT_DIR [CASE...] [-- EXTRA OPTIONS]
#
# CASE: l4096 and/or m32 (default both). Prints per case: wall s, user s, max RSS MB and the
# GEMM error's own seconds (summary.json), with `uptime` before each run. Captures are cached in
# OUT_DIR/captures.
set -euo pipefail
bin=$1 out=$2
shift 2
cases=() extra=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; extra=("$@"); break; fi
  cases+=("$1"); shift
done
[ ${#cases[@]} -gt 0 ] || cases=(l4096 m32)
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/captures"
for c in "${cases[@]}"; do
  cap=$out/captures/$c
  if [ ! -f "$cap/step_000001.safetensors" ]; then
    case $c in
      l4096) python3 "$here/make_gemm_capture.py" "$cap" --layers 1 --tokens 4096 --in 4096 --out 4096 ;;
      m32) python3 "$here/make_gemm_capture.py" "$cap" --layers 32 --tokens 1024 --in 1024 --out 1024 ;;
      *) echo "unknown case $c" >&2; exit 2 ;;
    esac
  fi
  run=$out/run-$c
  rm -rf "$run"
  echo "== $c: $bin run --capture $cap --out $run --cost none --quiet ${extra[*]:-}"
  uptime
  /usr/bin/time -f "wall_s %e user_s %U max_rss_mb %M" -o "$out/time-$c.txt" \
    "$bin" run --capture "$cap" --out "$run" --cost none --quiet "${extra[@]}" > /dev/null
  awk '{printf "wall_s %s user_s %s max_rss_mb %.0f\n", $2, $4, $6 / 1024}' "$out/time-$c.txt"
  python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['timings_s']; print('evaluate_s %.2f gemms_s %.2f' % (t['evaluate'], t['gemms']))" "$run/summary.json"
done
