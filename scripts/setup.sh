#!/usr/bin/env bash
# README command 1: install what is missing, build, and run fp8-advisor on the sample shaped like
# a real model (generated from its seed by `fp8-advisor synth --preset model`: 311 MB, too large to
# ship as bytes).
#   bash scripts/setup.sh            (build in ./build, the sample in ./build/sample-model,
#                                     reports in ./build/sample-run)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
source scripts/cuda-env.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release | grep -E "fp8-advisor|Error" || true
cmake --build build --target fp8-advisor
./build/cli/fp8-advisor synth --preset model --out build/sample-model
./build/cli/fp8-advisor run --capture build/sample-model --training-log build/sample-model/amax_trace.csv \
  --out build/sample-run
