#!/usr/bin/env bash
# The GEMM-output error at real model sizes (issue 35): `fp8-advisor run --cost none`, default
# options otherwise, on Llama-2-shaped BF16 captures from bench/make_llama_capture.py, and in the
# same run the peer, PyTorch's BF16 matmul on the same GEMM shapes (bench/peer_torch_gemm.py,
# one thread and all cores).
#
#   bench/run_gemm_bench.sh BINARY OUT_DIR [CASE...]
#
# CASE: 7b-layer (one Llama-2-7B layer, 4096 tokens), 7b-model4 (4 such layers: x8 for 32),
# 70b-fc1 (one Llama-2-70B fc1, 1024 tokens), 70b-fc1-4k (the same at 4096 tokens); default
# 7b-layer 70b-fc1. Captures are cached in OUT_DIR/captures (~1-4 GB each). Prints per case the
# load average, wall s, user s and peak RSS of the run (/usr/bin/time), the stage timings
# (summary.json), the GEMM stage's products and GFLOP/s per core (bench/gemm_stage_flops.py), then
# the peer's lines for the GEMMs fp8-advisor computed (its sampled rows and columns). Needs numpy
# and ml_dtypes for the generator (pip) and Debian's python3-torch (/usr/bin/python3) for the peer.
# Environment: GEN_PYTHON (default python3) runs the generator, PEER_PYTHON (default
# /usr/bin/python3) the peer, once per type in PEER_DTYPES (default "bfloat16"; "bfloat16 float32"
# adds the FMA units' rate, the peer that counts on a CPU without BF16 units).
set -euo pipefail
bin=$1 out=$2
shift 2
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(7b-layer 70b-fc1)
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/captures"
for c in "${cases[@]}"; do
  case $c in
    7b-layer) gen=(7b-layer) peer=(7b-layer) ;;
    7b-model4) gen=(7b-model --layers 4) peer=(7b-model --layers 4) ;;
    70b-fc1) gen=(70b-fc1) peer=(70b-fc1) ;;
    70b-fc1-4k) gen=(70b-fc1 --tokens 4096) peer=(70b-fc1 --tokens 4096) ;;
    *) echo "unknown case $c" >&2; exit 2 ;;
  esac
  cap=$out/captures/$c
  if [ ! -f "$cap/.complete" ]; then
    rm -rf "$cap"
    "${GEN_PYTHON:-python3}" "$here/make_llama_capture.py" "${gen[0]}" "$cap" "${gen[@]:1}"
    touch "$cap/.complete"
  fi
  run=$out/run-$c
  rm -rf "$run"
  echo "== $c: $bin run --capture $cap --out $run --cost none --quiet"
  echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/time -f "wall_s %e user_s %U max_rss_mb %M" -o "$out/time-$c.txt" \
    "$bin" run --capture "$cap" --out "$run" --cost none --quiet > /dev/null
  awk '{printf "wall_s %s user_s %s max_rss_mb %.0f\n", $2, $4, $6 / 1024}' "$out/time-$c.txt"
  python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['timings_s']; print(' '.join('%s_s %.2f' % kv for kv in t.items()))" "$run/summary.json"
  python3 "$here/gemm_stage_flops.py" "$run" | tee "$out/flops-$c.txt"
  for dtype in ${PEER_DTYPES:-bfloat16}; do
    echo "-- peer: ${PEER_PYTHON:-/usr/bin/python3} bench/peer_torch_gemm.py ${peer[*]} --shapes-from $run --no-isa --dtype $dtype"
    "${PEER_PYTHON:-/usr/bin/python3}" "$here/peer_torch_gemm.py" "${peer[@]}" --shapes-from "$run" \
      --no-isa --dtype "$dtype" | grep -E "^machine|^total|load"
  done
done
