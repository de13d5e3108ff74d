#!/usr/bin/env bash
# Step 1 of the GPU check (scripts/README-gpu.md), on the build machine: build fp8-advisor's CUDA
# pieces (Release, FP8A_WITH_CUDA=ON, sm_90) and copy into build/gpu-bundle/ everything a GPU
# machine without Debian -dev packages needs to run them:
#   bin/        every ctest test labelled cuda (or cuda-host; test_cli_gpu among them, which runs
#               fp8-advisor itself), fp8-advisor, bench_cuda_metrics
#   lib/        the shared libraries they need that are neither glibc's nor the driver's
#               (oneTBB, Boost.Program_options, the CUDA runtime they were built against), except
#               cuBLASLt (0.5 GiB): the GPU machine's own CUDA 13 cuBLASLt is used (run.sh finds it);
#   lib/compat/ libstdc++ and libgcc_s, used by run.sh only if the machine's own are too old
#   data/       the sample capture, the real lm-spike capture (test_cuda_backend reads both, through
#               FP8A_TEST_DATA) and their amax traces;  peer_torch.py, peer_torch_check.py;
#               make_big_capture.py, fp8a_capture.py and fp8a_safetensors.py (their writer);
#               run.sh (= gpu-check.sh) and
#               nvidia_wheels.py (where run.sh looks for cuBLASLt and compute-sanitizer in wheels)
#
#   bash scripts/gpu-bundle.sh [BUILD_DIR]        (default build-gpu)
#
# The bundle must stay under 64 MiB (what the device tool carries); the script fails if not.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
bundle=build/gpu-bundle
limit_mib=64
source scripts/cuda-env.sh

echo "== configure $build (Release, FP8A_WITH_CUDA=ON, sm_90)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8A_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DFP8A_WERROR=ON -DFP8A_CUDA_EMULATION=OFF | grep -E "fp8-advisor|Error" || true

# The CUDA tests, as ctest lists them: names now, executables once built. Labels cuda and
# cuda-host only (-L is a regular expression; cuda-emu is the host emulation, not for a GPU).
cuda_tests() {
  ctest --test-dir "$build" -L '^cuda(-host)?$' --show-only=json-v1 | python3 -c '
import json, sys
for t in json.load(sys.stdin)["tests"]:
    print(t["name"] + "\t" + (t["command"][0] if "command" in t else ""))'
}
mapfile -t tests < <(cuda_tests)
[ ${#tests[@]} -gt 0 ] || { echo "gpu-bundle: ctest lists no test labelled cuda" >&2; exit 1; }
targets=(fp8-advisor bench_cuda_metrics)
for t in "${tests[@]}"; do targets+=("${t%%$'\t'*}"); done

echo "== build ${targets[*]}"
cmake --build "$build" --target "${targets[@]}" -j "$(nproc)"
mapfile -t tests < <(cuda_tests)

echo "== bundle $bundle"
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib/compat" "$bundle/data/sample" "$bundle/data/real/lm-spike"
bins=("$build/cli/fp8-advisor" "$build/bench/bench_cuda_metrics")
for t in "${tests[@]}"; do
  exe=${t#*$'\t'}
  [ -x "$exe" ] || { echo "gpu-bundle: no executable for test ${t%%$'\t'*}" >&2; exit 1; }
  bins+=("$exe")
done
for b in "${bins[@]}"; do
  cp "$b" "$bundle/bin/"
  strip --strip-unneeded "$bundle/bin/$(basename "$b")"
done
printf '%s\n' "${tests[@]%%$'\t'*}" >"$bundle/bin/TESTS"

# Shared libraries: everything ldd resolves except glibc's own, the dynamic loader and the
# driver's (libcuda, libnvidia-*). The CUDA runtime is carried: it is small, and the binaries then
# run against the very runtime they were built with (the driver on the GPU machine is newer).
# cuBLASLt is not: at 0.5 GiB it is far over the bundle's limit, and the GPU machine has CUDA 13's
# (same soname, libcublasLt.so.13; the GEMM engine reports the version it loads).
declare -A seen=()
for b in "${bins[@]}"; do
  while read -r name path; do
    case "$name" in
      linux-vdso*|ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libcuda.so*|libnvidia*) continue ;;
      libcublas*) continue ;;
      libstdc++*|libgcc_s*) dest=lib/compat ;;
      *) dest=lib ;;
    esac
    [ -n "$path" ] && [ -z "${seen[$name]:-}" ] || continue
    seen[$name]=1
    cp -L "$path" "$bundle/$dest/$name"
  done < <(ldd "$b" | awk '/=> \// {print $1, $3}')
done

cp datasets/sample/*.safetensors datasets/sample/amax_trace.csv "$bundle/data/sample/"
cp datasets/real/lm-spike/*.safetensors datasets/real/lm-spike/amax_trace_rank0.csv "$bundle/data/real/lm-spike/"
cp bench/peer_torch.py bench/peer_torch_check.py bench/make_big_capture.py python/fp8a_capture.py python/fp8a_safetensors.py "$bundle/"
cp scripts/gpu-check.sh "$bundle/run.sh"
cp scripts/nvidia_wheels.py "$bundle/"
chmod +x "$bundle/run.sh"
{
  echo "fp8-advisor GPU bundle"
  echo "git_revision $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo '+local-changes')"
  echo "built $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m), $(. /etc/os-release && echo "$PRETTY_NAME"), $(nvcc --version | tail -1)"
  echo "cuda_architectures 90"
  echo "cublaslt_headers $(sed -n 's/^#define CUBLAS_VER_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$(dirname "$(command -v nvcc)")/../include/cublas_api.h" | paste -sd.) (the GPU machine's own libcublasLt.so.13 is used)"
} >"$bundle/BUNDLE"

size_kib=$(du -sk "$bundle" | cut -f1)
echo "== $bundle: $(find "$bundle" -type f | wc -l) files, $((size_kib / 1024)) MiB ($size_kib KiB)"
ls -la "$bundle/bin" "$bundle/lib" "$bundle/lib/compat"
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
  echo "gpu-bundle: the bundle is over ${limit_mib} MiB" >&2
  exit 1
fi
echo "next, on the GPU machine: bash build/gpu-bundle/run.sh   (or bash scripts/gpu-check.sh)"
