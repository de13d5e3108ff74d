#!/usr/bin/env bash
# Step 2 of the GPU check (scripts/README-gpu.md), on a machine with an NVIDIA GPU (sm_90),
# CUDA 13 and python3 (+ PyTorch for the peer), no build tools needed. It runs the bundle that
# scripts/gpu-bundle.sh made; in the bundle this file is run.sh.
#
#   bash build/gpu-bundle/run.sh        (or bash scripts/gpu-check.sh, which calls it)
#
# Steps, each with its own time limit, the whole under 8 minutes:
#   nvidia-smi -L; every CUDA test (test_cuda_*); test_cli_gpu: fp8-advisor run on the sample
#   capture with --device cpu and --device cuda, compared by tests/cli/run_compare.hpp (metrics.csv
#   and the emulated rows of gemms.csv, the cuda run's cuBLASLt rows against its emulated ones);
#   bench_cuda_metrics (K = 1, 8, 32 on 256M BF16 elements, the full recipe set) and the PyTorch
#   peer bench/peer_torch.py; end to end on a multi-GB capture (compared by test_cli_gpu too);
#   last, compute-sanitizer (memcheck, racecheck, synccheck, initcheck) on a --device cuda run of
#   the sample where the machine has it (SKIP, not FAIL, where it has not).
# This script only sequences: the checks are the C++ tests and the peers' .py files it runs.
# Ends with a PASS/FAIL line per step and "GPU CHECK: PASS" or "GPU CHECK: FAIL"; exit 0 only when
# every step passed. Logs go to $OUT (the device tool's output folder) or to ./out in the bundle:
# gpu-check.log (everything), bench.txt (benchmark lines), summary.txt, cuda-metrics.csv,
# cuda-gemms.csv and cuda-summary.json (the --device cuda run).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ ! -f "$here/BUNDLE" ]; then
  run="$here/../build/gpu-bundle/run.sh"
  if [ ! -f "$run" ]; then
    echo "gpu-check: no bundle at build/gpu-bundle: run 'bash scripts/gpu-bundle.sh' on the build machine first" >&2
    exit 2
  fi
  exec bash "$run" "$@"
fi

out=${OUT:-$here/out}
work=$(mktemp -d)
mkdir -p "$out"
log=$out/gpu-check.log
: >"$log"
: >"$out/bench.txt"
bin=$here/bin
budget_s=450  # no new step starts after this; the limits below keep the whole under 8 minutes
t_start=$(date +%s)
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
results=()
failed=0

say() { echo "$@" | tee -a "$log"; }

# step NAME LIMIT_S COMMAND...: runs the command with a time limit; the whole output goes to the
# log, its last lines to the screen. PASS when it exits 0.
step() {
  local name=$1 limit=$2
  shift 2
  say ""
  say "== $name"
  if [ $(( $(date +%s) - t_start )) -gt $budget_s ]; then
    say "skipped: past the ${budget_s}s budget"
    results+=("FAIL  $name (not run: time budget)")
    failed=$((failed + 1))
    return 1
  fi
  local t0 rc
  t0=$(date +%s)
  timeout "$limit" "$@" >"$work/step.txt" 2>&1
  rc=$?
  cat "$work/step.txt" >>"$log"
  tail -n 30 "$work/step.txt"
  local dt=$(( $(date +%s) - t0 ))
  if [ $rc -eq 0 ]; then
    results+=("PASS  $name (${dt}s)")
  else
    case $rc in
      77) results+=("FAIL  $name (skipped: no device seen, exit 77)") ;;
      124) results+=("FAIL  $name (timed out after ${limit}s)") ;;
      *) results+=("FAIL  $name (exit $rc, ${dt}s)") ;;
    esac
    failed=$((failed + 1))
  fi
  return $rc
}

# End to end on a multi-GB capture: the time to read the files from disk (O_DIRECT, so the page
# cache does not answer) against fp8-advisor run --device cuda (and --device cpu) on the same
# files, whose metrics must agree. The page cache is dropped before each run when the machine
# lets us; the log says whether it did.
read -r -d '' e2e_sh <<'SH'
work=$1 bin=$2 here=$3
dir=$work/big
rm -rf "$work/big-runs"
python3 "$here/make_big_capture.py" "$dir" 12 2 || exit 1
du -sh "$dir"
drop() {
  sync
  if echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then echo "page cache dropped"
  else echo "page cache NOT dropped (no permission): the runs may read from memory"; fi
}
# O_DIRECT where the file system takes it (tmpfs and some sandboxes' file systems refuse it):
# else a plain read after dropping the page cache, and the line says which.
direct=(iflag=direct) how="dd iflag=direct"
if ! dd if="$(ls "$dir"/*.safetensors | head -n 1)" of=/dev/null bs=4096 count=1 "${direct[@]}" status=none 2>/dev/null; then
  drop
  direct=() how="dd without O_DIRECT (refused here), after the page-cache drop above"
fi
t0=$(date +%s.%N)
for f in "$dir"/*.safetensors; do dd if="$f" of=/dev/null bs=16M "${direct[@]}" status=none || exit 1; done
t1=$(date +%s.%N)
bytes=$(du -cb "$dir"/* | tail -n 1 | cut -f1)
awk -v b="$bytes" -v t0="$t0" -v t1="$t1" -v how="$how" \
  'BEGIN { t = t1 - t0; printf "e2e_disk_read bytes=%.0f seconds=%.3f GB/s=%.2f (%s)\n", b, t, b / t / 1e9, how }'
failed=0
for d in cuda cpu; do  # the CPU run is timed even when the CUDA one fails
  drop
  t0=$(date +%s.%N)
  if ! "$bin/fp8-advisor" run --capture "$dir" --device $d --no-gemms --out "$work/big-runs/$d" >/dev/null; then
    echo "e2e_run device=$d FAILED"
    failed=1
    continue
  fi
  t1=$(date +%s.%N)
  awk -v d=$d -v t0="$t0" -v t1="$t1" 'BEGIN { printf "e2e_run device=%s wall_seconds=%.3f\n", d, t1 - t0 }'
done
# metrics.csv of the two runs, by the rules of the sample's comparison (tests/cli/run_compare.hpp);
# test_cli_gpu also prints each run's timings_s from summary.json (e2e_run ... timings_s=...).
if [ $failed -eq 0 ]; then
  FP8A_TEST_E2E_DIR="$work/big-runs" "$bin/test_cli_gpu" || failed=1
fi
rm -rf "$dir"
exit $failed
SH

say "fp8-advisor GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), bundle:"
sed 's/^/  /' "$here/BUNDLE" | tee -a "$log"
step "nvidia-smi -L" 30 nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1 | tee -a "$log"

# cuBLASLt is not in the bundle (0.5 GiB): use the machine's CUDA 13 one when the loader does not
# find it by itself: from the CUDA toolkit (lib64/ or lib/), or from PyTorch's wheels (CUDA 13
# wheels put it in site-packages/nvidia/cu13/lib; CUDA 12 ones had nvidia/cublas/lib), or
# wherever else under /usr and /opt it is.
cublaslt_dirs() {
  ls -d /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/*/lib \
        /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/lib 2>/dev/null
  python3 "$here/nvidia_wheels.py" 2>/dev/null | sed 's|$|/lib|'
  ldconfig -p 2>/dev/null | sed -n 's|.*libcublasLt\.so\.13 .*=> \(.*\)/libcublasLt\.so\.13$|\1|p'
  timeout 20 find /usr /opt -maxdepth 9 -name libcublasLt.so.13 -printf '%h\n' 2>/dev/null
}
if ldd "$bin/fp8-advisor" 2>/dev/null | grep -q "libcublasLt.so.13 => not found"; then
  while read -r d; do
    if [ -e "$d/libcublasLt.so.13" ]; then
      export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
      break
    fi
  done < <(cublaslt_dirs)
fi
say "libcublasLt: $(ldd "$bin/fp8-advisor" 2>&1 | grep libcublasLt || echo 'not needed')"

# The binaries were built on another system: fall back to the carried libstdc++/libgcc_s only
# when the machine's own cannot run them.
chmod +x "$bin"/* 2>/dev/null
if ! "$bin/fp8-advisor" --version >"$work/version.txt" 2>&1; then
  say "fp8-advisor does not start with the machine's libraries: $(head -c 300 "$work/version.txt")"
  ldd "$bin/fp8-advisor" 2>&1 | tee -a "$log"
  export LD_LIBRARY_PATH="$here/lib:$here/lib/compat:$LD_LIBRARY_PATH"
  say "using the bundle's lib/compat"
fi
step "fp8-advisor --version" 30 "$bin/fp8-advisor" --version

export FP8A_TEST_DATA="$here/data"  # the captures test_cuda_backend reads (test_cuda_run.cpp)
while read -r t; do
  [ -n "$t" ] || continue
  [ "$t" != test_cli_gpu ] || continue  # its own step below, with the bundle's fp8-advisor
  step "$t" 300 "$bin/$t" --abort-after=200
done <"$bin/TESTS"

# fp8-advisor run on the sample with --device cpu and --device cuda, compared (test_cli_gpu,
# tests/cli/run_compare.hpp); the runs are kept in $runs for the files copied to $out.
sample=$here/data/sample
runs=$work/runs
step "fp8-advisor run --device cpu vs --device cuda on the sample (test_cli_gpu: summary.json, metrics.csv, gemms.csv emulated and cublaslt rows)" 300 \
  env FP8A_TEST_BINARY="$bin/fp8-advisor" FP8A_TEST_OUT_DIR="$runs" "$bin/test_cli_gpu"
cp "$runs/cuda/metrics.csv" "$out/cuda-metrics.csv" 2>/dev/null
cp "$runs/cuda/gemms.csv" "$out/cuda-gemms.csv" 2>/dev/null
cp "$runs/cuda/summary.json" "$out/cuda-summary.json" 2>/dev/null

step "bench_cuda_metrics K=1,8,32, 256M BF16 elements" 180 \
  "$bin/bench_cuda_metrics" --elements 268435456 --candidates 1,8,32 --repeat 5
grep -E "^(#|fp8a_cuda|d2d_copy)" "$work/step.txt" >>"$out/bench.txt"
step "peer_torch.py K=1,8,32, 256M BF16 elements (PyTorch eager)" 240 \
  env PYTHONUNBUFFERED=1 python3 "$here/peer_torch.py" --elements 268435456 --candidates 1,8,32 --device cuda --repeat 5
grep -E "^(#|peer_torch|  )" "$work/step.txt" >>"$out/bench.txt"
step "peer_torch_check.py: the peer's metrics (torch float8 on the GPU) == fp8-advisor's" 60 \
  python3 "$here/peer_torch_check.py" --binary "$bin/fp8-advisor" --device cuda
step "bench_cuda_metrics --recipes all, 16384x16384 BF16" 180 \
  "$bin/bench_cuda_metrics" --elements 268435456 --recipes all --repeat 3
grep -E "^(fp8a_cuda|  )" "$work/step.txt" >>"$out/bench.txt"
step "end to end: fp8-advisor run --device cuda/cpu on a 3.9 GB capture vs reading it from disk" 150 \
  bash -c "$e2e_sh" e2e "$work" "$bin" "$here"
grep -E "^(e2e_|page cache|wrote)" "$work/step.txt" >>"$out/bench.txt"

# compute-sanitizer, when the machine has it (the toolkit's, or a wheel's): memcheck on the cuda
# run of the sample with its GEMMs (the real cuBLASLt reading our padded operands and block-scale
# tensors), racecheck, synccheck and initcheck on the metric kernels alone (--no-gemms). Any
# report fails the step. Last, so that a slow sanitizer never costs the checks above their time.
sanitizer=$( { command -v compute-sanitizer; ls /usr/local/cuda*/bin/compute-sanitizer \
  /usr/local/cuda*/compute-sanitizer/compute-sanitizer
  python3 "$here/nvidia_wheels.py" | while read -r w; do ls "$w"/bin/compute-sanitizer; done; } 2>/dev/null | head -n 1)
if [ -n "$sanitizer" ]; then
  say "compute-sanitizer: $sanitizer"
  for tool in memcheck racecheck synccheck initcheck; do
    gemms=--no-gemms what="metric kernels"
    if [ $tool = memcheck ]; then gemms= what="metric kernels and cuBLASLt GEMMs"; fi
    step "compute-sanitizer --tool $tool: fp8-advisor run --device cuda on the sample ($what)" 90 \
      "$sanitizer" --tool $tool --error-exitcode 1 "$bin/fp8-advisor" run --capture "$sample" \
      --out "$runs/sanitizer-$tool" --device cuda $gemms
  done
else
  say ""
  say "compute-sanitizer not found (PATH, /usr/local/cuda*, NVIDIA wheels): its steps are not run"
  results+=("SKIP  compute-sanitizer memcheck/racecheck/synccheck/initcheck (not found on this machine)")
fi

{
  echo ""
  echo "== summary ($(( $(date +%s) - t_start ))s)"
  printf '%s\n' "${results[@]}"
  if [ $failed -eq 0 ]; then
    echo "GPU CHECK: PASS (${#results[@]} steps)"
  else
    echo "GPU CHECK: FAIL ($failed of ${#results[@]} steps failed; details in gpu-check.log)"
  fi
} | tee -a "$log" | tee "$out/summary.txt"
echo ""
echo "benchmark lines (also in bench.txt):"
cat "$out/bench.txt" 2>/dev/null | grep -E "^(fp8a_cuda|d2d_copy|peer_torch)"
rm -rf "$work"
[ $failed -eq 0 ]
