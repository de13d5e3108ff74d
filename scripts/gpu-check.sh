#!/usr/bin/env bash
# Step 2 of the GPU check (scripts/README-gpu.md), on a machine with an NVIDIA GPU (sm_90),
# CUDA 13 and python3 (+ PyTorch for the peer), no build tools needed. It runs the bundle that
# scripts/gpu-bundle.sh made; in the bundle this file is run.sh.
#
#   bash build/gpu-bundle/run.sh        (or bash scripts/gpu-check.sh, which calls it)
#
# Steps, each with its own time limit, the whole under 8 minutes:
#   nvidia-smi -L; every CUDA test (test_cuda_*); fp8-advisor run on the sample capture with
#   --device cpu and --device cuda, metrics.csv and the emulated rows of gemms.csv compared (rows
#   sorted, text equal, numbers within 1e-9 relative), and the cuda run's cuBLASLt rows checked
#   against its emulated ones; bench_cuda_metrics (K = 1, 8, 32 on 256M BF16 elements, the full
#   recipe set) and the PyTorch peer bench/peer_torch.py; end to end on a multi-GB capture; last,
#   compute-sanitizer (memcheck, racecheck, synccheck, initcheck) on a --device cuda run of the
#   sample where the machine has it (SKIP, not FAIL, where it has not).
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

read -r -d '' compare_py <<'PY'
"""Compares two CSV reports: same header, same rows once sorted by their key columns, text equal,
numbers within a relative tolerance; log-scaled columns (dB, binades), which sit near 0 where a
relative tolerance means nothing, within an absolute one as well."""
import csv, math, sys

KEYS = ["step", "layer", "tensor", "gemm", "recipe", "format", "orientation"]
REL, ABS = 1e-9, 1e-9
LOG_COLUMNS = {"sqnr_db", "delayed_vs_current_log2", "dynamic_range_log2"}
# Rows with a numel column: float64 sums of numel non-negative terms added in two orders differ
# by at most 2 numel 2^-53 relative (METRICS.md); derived metrics (ratios, sqrt, log10 in dB)
# amplify that up to ~13x. Above ~4M elements that bound exceeds REL.
def row_rel(header, row):
    if "numel" not in header:
        return REL
    try:
        return max(REL, 30.0 * float(row[header.index("numel")]) * 2.0 ** -53)
    except ValueError:
        return REL

def load(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]

def num(s):
    try:
        return float(s)
    except ValueError:
        return None

def main(a, b):
    ha, ra = load(a)
    hb, rb = load(b)
    if ha != hb:
        print("header differs:\n  %s\n  %s" % (ha, hb))
        return 1
    idx = [ha.index(k) for k in KEYS if k in ha]
    key = lambda r: [r[i] for i in idx]
    ra.sort(key=key)
    rb.sort(key=key)
    if len(ra) != len(rb):
        print("row count differs: %d vs %d" % (len(ra), len(rb)))
        return 1
    bad, worst = 0, (0.0, "")
    for x, y in zip(ra, rb):
        if key(x) != key(y):
            print("rows differ: %s vs %s" % (key(x), key(y)))
            return 1
        for c, (u, v) in enumerate(zip(x, y)):
            if u == v:
                continue
            p, q = num(u), num(v)
            ok = p is not None and q is not None
            if ok and (math.isnan(p) or math.isnan(q) or math.isinf(p) or math.isinf(q)):
                ok = (math.isnan(p) and math.isnan(q)) or p == q
            elif ok:
                d, m = abs(p - q), max(abs(p), abs(q))
                ok = d <= max(row_rel(ha, x) * m, ABS if ha[c] in LOG_COLUMNS else 0.0)
                rel = d / m if m > 0 else 0.0
                if rel > worst[0]:
                    worst = (rel, "%s %s: %s vs %s" % (key(x), ha[c], u, v))
            if not ok:
                bad += 1
                if bad <= 20:
                    print("MISMATCH %s %s: %s vs %s" % (key(x), ha[c], u, v))
    print("%s vs %s: %d rows x %d columns, %d mismatches; largest relative difference %.3g %s"
          % (a, b, len(ra), len(ha), bad, worst[0], worst[1]))
    return 1 if bad else 0

sys.exit(main(sys.argv[1], sys.argv[2]))
PY

read -r -d '' emulated_py <<'PY'
"""Writes the emulated rows of a gemms.csv without the note column (the --device cuda run notes
there why cuBLASLt did not run a GEMM; the numbers must equal the CPU run's)."""
import csv, sys

with open(sys.argv[1], newline="") as f:
    rows = list(csv.DictReader(f))
cols = [c for c in rows[0].keys() if c != "note"] if rows else []
with open(sys.argv[2], "w", newline="") as f:
    out = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    out.writeheader()
    out.writerows(r for r in rows if r["engine"] == "emulated")
PY

read -r -d '' cublaslt_py <<'PY'
"""Checks the cuBLASLt rows of the --device cuda run's gemms.csv: every emulated row has a cublaslt
row for the same (step, layer, GEMM, recipe) or a note saying why not, where the reason is the
plan's (GPU or cuBLASLt too old for the recipe), never cuBLASLt refusing a GEMM the plan expected
it to run; and where both rows exist their rel_fro_err differ by no more than the accumulation can
explain (same quantised operands; the capture is BF16, so the BF16 reference has no input
rounding): 5e-3 with FP8 fast accumulation (~14-bit accumulator, K <= 384 here), 1e-4 with split
(the accumulator promoted to FP32 periodically) or FP32 accumulation."""
import csv, sys

TOL = {"fast": 5e-3, "split": 1e-4, "fp32": 1e-4}
with open(sys.argv[1], newline="") as f:
    rows = list(csv.DictReader(f))
key = lambda r: (r["step"], r["layer"], r["gemm"], r["recipe"])
emulated = [r for r in rows if r["engine"] == "emulated"]
cublaslt = {key(r): r for r in rows if r["engine"] == "cublaslt"}
bad, not_run = 0, {}
for e in emulated:
    r = cublaslt.get(key(e))
    if r is None:
        if not e["note"].startswith("cublaslt not run: "):
            bad += 1
            print("NO CUBLASLT ROW AND NO NOTE %s" % (key(e),))
        elif "cublasLtMatmulAlgoGetHeuristic" in e["note"]:
            bad += 1
            print("CUBLASLT REFUSED A PLANNED GEMM %s: %s" % (key(e), e["note"]))
        not_run[e["recipe"] + ": " + e["note"]] = not_run.get(e["recipe"] + ": " + e["note"], 0) + 1
        continue
    d = abs(float(r["rel_fro_err"]) - float(e["rel_fro_err"]))
    ok = d <= TOL[r["accumulation"]]
    bad += not ok
    print("%-8s %s rel_fro_err emulated %.6g cublaslt %.6g (%s accumulation, padded %sx%sx%s)%s"
          % ("ok" if ok else "MISMATCH", key(e), float(e["rel_fro_err"]), float(r["rel_fro_err"]),
             r["accumulation"], r["padded_m"], r["padded_n"], r["padded_k"], "" if ok else " diff %.3g" % d))
for note, n in sorted(not_run.items()):
    print("not run (%d GEMMs) %s" % (n, note))
print("%d emulated rows, %d cublaslt rows, %d not run, %d problems"
      % (len(emulated), len(cublaslt), len(emulated) - len(cublaslt), bad))
sys.exit(1 if bad or not cublaslt else 0)
PY

# End to end on a multi-GB capture: the time to read the files from disk (O_DIRECT, so the page
# cache does not answer) against fp8-advisor run --device cuda (and --device cpu) on the same
# files, whose metrics must agree. The page cache is dropped before each run when the machine
# lets us; the log says whether it did.
read -r -d '' e2e_sh <<'SH'
work=$1 bin=$2 here=$3
dir=$work/big
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
python3 -c "import os,sys; b=sum(os.path.getsize(os.path.join(sys.argv[1],f)) for f in os.listdir(sys.argv[1])); t=float(sys.argv[3])-float(sys.argv[2]); print('e2e_disk_read bytes=%d seconds=%.3f GB/s=%.2f (%s)' % (b, t, b/t/1e9, sys.argv[4]))" "$dir" "$t0" "$t1" "$how"
failed=0
for d in cuda cpu; do  # the CPU run is timed even when the CUDA one fails
  drop
  t0=$(date +%s.%N)
  if ! "$bin/fp8-advisor" run --capture "$dir" --device $d --no-gemms --out "$work/big-$d" >/dev/null; then
    echo "e2e_run device=$d FAILED"
    failed=1
    continue
  fi
  t1=$(date +%s.%N)
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('e2e_run device=%s wall_seconds=%.3f timings_s=%s' % (sys.argv[2], float(sys.argv[4])-float(sys.argv[3]), j.get('timings_s')))" "$work/big-$d/summary.json" $d "$t0" "$t1"
done
if [ $failed -eq 0 ]; then
  cmp_out=$(python3 -c "$COMPARE_PY" "$work/big-cpu/metrics.csv" "$work/big-cuda/metrics.csv") || failed=1
  echo "$cmp_out" | tail -n 1
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
  python3 -c '
import os
try:
    import nvidia
    for p in nvidia.__path__:
        for sub in sorted(os.listdir(p)):
            print(os.path.join(p, sub, "lib"))
except Exception:
    pass' 2>/dev/null
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
  step "$t" 300 "$bin/$t" --abort-after=200
done <"$bin/TESTS"

sample=$here/data/sample
runs=$work/runs
for d in cpu cuda; do
  step "fp8-advisor run --device $d (sample capture)" 300 \
    "$bin/fp8-advisor" run --capture "$sample" --amax-trace "$sample/amax_trace.csv" --out "$runs/$d" --device $d
done
cp "$runs/cuda/metrics.csv" "$out/cuda-metrics.csv" 2>/dev/null
cp "$runs/cuda/gemms.csv" "$out/cuda-gemms.csv" 2>/dev/null
cp "$runs/cuda/summary.json" "$out/cuda-summary.json" 2>/dev/null
step "summary.json of the cuda run names backend cuda" 30 python3 -c '
import json, sys
b = json.load(open(sys.argv[1]))["backend"]
print(b)
sys.exit(0 if b["name"] == "cuda" and b["cuda_devices"] >= 1 else 1)' "$runs/cuda/summary.json"
step "metrics.csv: cpu == cuda (1e-9 relative)" 60 python3 -c "$compare_py" "$runs/cpu/metrics.csv" "$runs/cuda/metrics.csv"
for d in cpu cuda; do
  python3 -c "$emulated_py" "$runs/$d/gemms.csv" "$runs/$d/gemms-emulated.csv" 2>>"$log"
done
step "gemms.csv emulated rows: cpu == cuda (1e-9 relative)" 60 \
  python3 -c "$compare_py" "$runs/cpu/gemms-emulated.csv" "$runs/cuda/gemms-emulated.csv"
step "gemms.csv cublaslt rows: beside every emulated row (or a note why not), same error up to accumulation" 60 \
  python3 -c "$cublaslt_py" "$runs/cuda/gemms.csv"

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
  env COMPARE_PY="$compare_py" bash -c "$e2e_sh" e2e "$work" "$bin" "$here"
grep -E "^(e2e_|page cache|wrote)" "$work/step.txt" >>"$out/bench.txt"

# compute-sanitizer, when the machine has it (the toolkit's, or a wheel's): memcheck on the cuda
# run of the sample with its GEMMs (the real cuBLASLt reading our padded operands and block-scale
# tensors), racecheck, synccheck and initcheck on the metric kernels alone (--no-gemms). Any
# report fails the step. Last, so that a slow sanitizer never costs the checks above their time.
sanitizer=$( { command -v compute-sanitizer; ls /usr/local/cuda*/bin/compute-sanitizer \
  /usr/local/cuda*/compute-sanitizer/compute-sanitizer; python3 -c '
import glob, os
try:
    import nvidia
    for p in nvidia.__path__:
        print("\n".join(sorted(glob.glob(os.path.join(p, "*", "bin", "compute-sanitizer")))))
except Exception:
    pass'; } 2>/dev/null | head -n 1)
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
