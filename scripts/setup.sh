#!/usr/bin/env bash
# README command 1: install what is missing, build, and run fp8-advisor on the sample shaped like
# a real model (generated from its seed by `fp8-advisor synth --preset model`: 311 MB, too large to
# ship as bytes).
#   bash scripts/setup.sh            (build in ./build, the sample in ./build/sample-model,
#                                     reports in ./build/sample-run)
# The CUDA backend is built when a GPU is present (nvidia-smi lists one) or asked for with
# FP8A_WITH_CUDA=ON (AUTO: when the toolkit is found); without a GPU it could not run, and its
# kernels for four architectures are most of the build. scripts/test.sh builds it regardless.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh build
source scripts/build-env.sh
cuda=${FP8A_WITH_CUDA:-}
if [ -z "$cuda" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then cuda=AUTO; else cuda=OFF; fi
fi
cmake -S . -B build "${build_flags[@]}" -DFP8A_WITH_CUDA="$cuda" | grep -E "fp8-advisor|Error" || true
cmake --build build --target fp8-advisor
echo "== built ($(fp8a_elapsed))"
./build/cli/fp8-advisor synth --preset model --out build/sample-model
./build/cli/fp8-advisor run --capture build/sample-model --training-log build/sample-model/amax_trace.csv \
  --out build/sample-run
