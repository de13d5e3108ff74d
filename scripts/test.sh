#!/usr/bin/env bash
# README command 2: the whole test suite, in both build configurations, warnings as errors:
#   build      FP8A_WITH_CUDA=AUTO (CUDA backend compiled when nvcc + cuBLASLt are present): the
#              tests whose code differs from build-cpu's: the CUDA backend's (labels cuda-host,
#              cuda-ptx, and cuda, which skip, saying so, without a GPU) and test_cli on the
#              binary with the CUDA backend compiled in. Every other test is the same object
#              code as in build-cpu (the same compile commands), so it runs once, there.
#   build-cpu  FP8A_WITH_CUDA=OFF (the CPU-only configuration must build and pass too), every
#              test, with the CUDA backend's tests on the host emulation of tests/cuda_emu (label
#              cuda-emu, about 2 min).
# After scripts/setup.sh, build/ holds fp8-advisor compiled with these flags (scripts/build-env.sh)
# and ccache the rest of setup's objects: nothing is compiled twice.
# The consumer checks (label "consumers") run in build/consumers-venv, made by
# scripts/consumers-env.sh from PyPI (about 2 min and 5.5 GB the first time, nothing after);
# FP8A_SKIP_CONSUMERS=1 leaves it out and those tests skip. They run once, in build-cpu (they
# do not depend on the build). docs/TESTING.md has the times.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
source scripts/build-env.sh
[ "${FP8A_SKIP_CONSUMERS:-0}" = 1 ] || bash scripts/consumers-env.sh
echo "== consumer venv ready ($(fp8a_elapsed))"
jobs=$(nproc)
echo "== configure build (FP8A_WITH_CUDA=AUTO)"
cmake -S . -B build "${build_flags[@]}" -DFP8A_WITH_CUDA=AUTO | grep -E "fp8-advisor|Error" || true
echo "== configure build-cpu (FP8A_WITH_CUDA=OFF)"
cmake -S . -B build-cpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8A_WITH_CUDA=OFF -DFP8A_WERROR=ON \
  -DFP8A_CUDA_EMULATION=ON -DFP8A_CONSUMER_TESTS=ON "${launcher[@]}" | grep -E "fp8-advisor|Error" || true
echo "== build build-cpu ($(fp8a_elapsed))"
cmake --build build-cpu -j "$jobs"
echo "== test build-cpu ($(fp8a_elapsed))"
(cd build-cpu && ctest --output-on-failure -j "$jobs")
echo "== build build ($(fp8a_elapsed))"
cmake --build build -j "$jobs"
echo "== test build ($(fp8a_elapsed))"
(cd build && ctest --output-on-failure -j "$jobs" -L '^cuda(-host|-ptx)?$')
(cd build && ctest --output-on-failure -j "$jobs" -R '^test_cli$')
echo "== done ($(fp8a_elapsed))"
