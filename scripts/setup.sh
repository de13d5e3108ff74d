#!/usr/bin/env bash
# README command 1: install what is missing, build, and run fp8-advisor on the shipped sample.
#   bash scripts/setup.sh            (build in ./build, reports in ./build/sample-run)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
source scripts/cuda-env.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release | grep -E "fp8-advisor|Error" || true
cmake --build build --target fp8-advisor
./build/cli/fp8-advisor run --capture datasets/sample --training-log datasets/sample/amax_trace.csv \
  --out build/sample-run --format hybrid
