#!/usr/bin/env bash
# Installs the Debian packages fp8-advisor builds and tests with, when any is missing
# (python3-torch: the capture hook's test runs a real PyTorch; python3-venv: that test and
# scripts/consumers-env.sh make virtualenvs; python3-lxml: report.html's parser check; chromium:
# report.html rendered in a real browser, tests/reports/render_check.py; libopenmpi-dev and
# openmpi-bin: `run` over MPI ranks and its mpirun test, optional at build time; libre2-dev and
# pkg-config: whatif --layer's regular expressions; libdnnl-dev: oneDNN, the
# GEMM-output error's products (engine/cpu_gemm.hpp); ccache: scripts/test.sh's second build takes
# the objects it shares with the first from the cache). Runs as root (or
# with sudo when available). The CUDA toolkit is optional and not installed here.
#   bash scripts/install-deps.sh          everything (scripts/test.sh)
#   bash scripts/install-deps.sh build    what building and running fp8-advisor needs
#                                         (scripts/setup.sh): not python3-torch, python3-venv,
#                                         python3-lxml or chromium, which only tests use
set -euo pipefail
packages=(cmake ninja-build g++ git python3 libeigen3-dev libboost-program-options-dev
          nlohmann-json3-dev libyaml-cpp-dev libtbb-dev doctest-dev libopenmpi-dev openmpi-bin
          libre2-dev pkg-config ccache libdnnl-dev)
[ "${1:-}" = build ] || packages+=(python3-torch python3-venv python3-lxml chromium)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
