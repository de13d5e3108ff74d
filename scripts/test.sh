#!/usr/bin/env bash
# README command 2: the whole test suite, in both build configurations, warnings as errors:
#   build      FP8A_WITH_CUDA=AUTO (CUDA backend compiled when nvcc + cuBLASLt are present)
#   build-cpu  FP8A_WITH_CUDA=OFF  (the CPU-only configuration must build and pass too), with the
#              CUDA backend's tests on the host emulation of tests/cuda_emu (label cuda-emu, about 2 min)
# GPU tests carry the ctest label "cuda" and skip, saying so, on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
source scripts/cuda-env.sh
jobs=$(nproc)
for cfg in "build AUTO OFF" "build-cpu OFF ON"; do
  set -- $cfg
  dir=$1 cuda=$2 emulation=$3
  echo "== configure $dir (FP8A_WITH_CUDA=$cuda)"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8A_WITH_CUDA="$cuda" -DFP8A_WERROR=ON \
    -DFP8A_CUDA_EMULATION="$emulation" \
    | grep -E "fp8-advisor|Error" || true
  echo "== build $dir"
  cmake --build "$dir" -j "$jobs"
  echo "== test $dir"
  (cd "$dir" && ctest --output-on-failure -j "$jobs")
done
