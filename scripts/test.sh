#!/usr/bin/env bash
# README command 2: the whole test suite, in both build configurations, warnings as errors:
#   build      FP8A_WITH_CUDA=AUTO (CUDA backend compiled when nvcc + cuBLASLt are present)
#   build-cpu  FP8A_WITH_CUDA=OFF  (the CPU-only configuration must build and pass too), with the
#              CUDA backend's tests on the host emulation of tests/cuda_emu (label cuda-emu, about 2 min)
# GPU tests carry the ctest label "cuda" and skip, saying so, on machines without a GPU.
# The consumer checks (label "consumers") run in build/consumers-venv, made by
# scripts/consumers-env.sh from PyPI (about 2 min and 5.5 GB the first time, nothing after);
# FP8A_SKIP_CONSUMERS=1 leaves it out and those tests skip. They run once, in build-cpu (they
# do not depend on the build).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
[ "${FP8A_SKIP_CONSUMERS:-0}" = 1 ] || bash scripts/consumers-env.sh
source scripts/cuda-env.sh
jobs=$(nproc)
# ccache (scripts/install-deps.sh): build-cpu compiles most of its C++ files (154 of 217) with the
# same command lines as build, so it takes them from the cache the first build filled. Relative to
# the checkout (CCACHE_BASEDIR), so a clone elsewhere hits too. CCACHE_DISABLE=1 turns it off; it
# is left out where it cannot compile a one-line file (e.g. its cache cannot be written).
ccache_works() {
  local tmp rc
  command -v ccache >/dev/null || return 1
  tmp=$(mktemp -d)
  echo 'int fp8a_probe;' > "$tmp/probe.cpp"
  ccache c++ -c "$tmp/probe.cpp" -o "$tmp/probe.o" >/dev/null 2>&1 && rc=0 || rc=1
  rm -rf "$tmp"
  return $rc
}
launcher=(-DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER=)  # also clears an earlier run's
if ccache_works; then
  export CCACHE_BASEDIR=$PWD
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
for cfg in "build AUTO OFF OFF" "build-cpu OFF ON ON"; do
  set -- $cfg
  dir=$1 cuda=$2 emulation=$3 consumers=$4
  echo "== configure $dir (FP8A_WITH_CUDA=$cuda)"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8A_WITH_CUDA="$cuda" -DFP8A_WERROR=ON \
    -DFP8A_CUDA_EMULATION="$emulation" -DFP8A_CONSUMER_TESTS="$consumers" "${launcher[@]}" \
    | grep -E "fp8-advisor|Error" || true
  echo "== build $dir"
  cmake --build "$dir" -j "$jobs"
  echo "== test $dir"
  (cd "$dir" && ctest --output-on-failure -j "$jobs")
done
