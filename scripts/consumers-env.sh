#!/usr/bin/env bash
# Creates the virtualenv the consumer checks (tests/consumers/, ctest label "consumers") run in:
# the consumers' own parsers from PyPI at the versions of tests/consumers/requirements.txt, on
# Debian 12's /usr/bin/python3 (3.11).
#   bash scripts/consumers-env.sh [VENV]      default build/consumers-venv
# Does nothing when VENV was made from the same pins (a stamp holds their hash); when only
# python/ changed (a second stamp), reinstalls just that package. Besides pip:
#  - Transformer Engine 2.20.2: its pure-Python wheel is unpacked into VENV/share/fp8a/te, not
#    installed: the checks load transformer_engine/common/recipe/__init__.py by path, since
#    importing the package needs libtransformer_engine.so, and an installed TE breaks Megatron's
#    imports (it raises RuntimeError where Megatron catches ImportError). TE 2.4.0, the oldest
#    release docs/VERSIONS.md claims, is unpacked the same way into VENV/share/fp8a/te-2.4.
#  - Megatron-Core 0.19.2: its wheel says Requires-Python >= 3.12; its Python sources (all of
#    which compile on 3.11) are unpacked into site-packages without the one compiled module
#    (megatron/core/datasets/helpers_cpp, cp312, unused by the checks). 0.16.1, the last release
#    for 3.11, has no megatron/training (the argument parser).
# PyPI's torch is a CUDA build: it pulls NVIDIA's runtime wheels (most of the venv's size) and
# runs on the CPU without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-build/consumers-venv}
python=/usr/bin/python3
te_version=2.20.2
megatron_version=0.19.2
req=tests/consumers/requirements.txt
con=tests/consumers/constraints.txt
stamp_text="$(cat "$req" "$con" 2>/dev/null; echo "te=$te_version megatron=$megatron_version")"
stamp=$(printf '%s' "$stamp_text" | sha256sum | cut -c1-16)
capture_stamp=$(find python -type f -not -path '*/__pycache__/*' -not -path '*.egg-info/*' \
                  -not -path '*/build/*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
# The capture hook and recipe loader's package, as a training script installs it, so the checks
# import what pip installed (its own backend writes nothing into python/).
install_capture() {
  "$venv/bin/python" -m pip --disable-pip-version-check -q install --no-deps --force-reinstall ./python
  printf '%s\n' "$capture_stamp" > "$venv/.fp8a-capture-stamp"
}
# The oldest TE release docs/VERSIONS.md claims, its pure-Python wheel unpacked beside the newest
# (tests/consumers run_checks.py te_oldest): 515 kB, fetched once into an existing venv too.
te_oldest=2.4.0
# unpack_wheel DIR PACKAGE VERSION [PREFIX]: the wheel of PACKAGE==VERSION unpacked into DIR (not
# installed): whole, or with PREFIX only the files under PREFIX but compiled modules (.so);
# VERSION its stamp; nothing when DIR holds that version already.
unpack_wheel() {
  local dir=$1 tmp
  [ -f "$dir/.fp8a-stamp" ] && [ "$(cat "$dir/.fp8a-stamp")" = "$3" ] && return 0
  tmp=$(mktemp -d)
  "$venv/bin/python" -m pip --disable-pip-version-check -q download --no-deps --only-binary=:all: \
    -d "$tmp" "$2==$3"
  rm -rf "$dir"
  mkdir -p "$dir"
  "$venv/bin/python" - "$tmp" "$dir" "${4:-}" <<'PY'
import glob, sys, zipfile
tmp, out, prefix = sys.argv[1:]
with zipfile.ZipFile(glob.glob(tmp + "/*.whl")[0]) as z:
    z.extractall(out, [n for n in z.namelist()
                       if not prefix or (n.startswith(prefix) and not n.endswith(".so"))])
PY
  rm -rf "$tmp"
  printf '%s\n' "$3" > "$dir/.fp8a-stamp"
}
install_te_oldest() { unpack_wheel "$venv/share/fp8a/te-2.4" transformer-engine "$te_oldest"; }
# Older Megatron-Core releases beside the venv's 0.19.2, each wheel's megatron/ sources (about 2.5 MB;
# no megatron/training) in VENV/share/fp8a/megatron-<v>, for run_checks.py (FP8A_MEGATRON_SRC):
# 0.16.1, the oldest with --te-precision-config-file (megatron_oldest, megatron_args_0.16, bridge),
# and 0.13.1, the oldest docs/VERSIONS.md claims for megatron_args.txt (megatron_args_0.13). Their
# argument parsers are in tests/consumers/megatron-lm/.
megatron_olders="0.13.1 0.16.1"
install_megatron_olders() {
  local v
  for v in $megatron_olders; do
    unpack_wheel "$venv/share/fp8a/megatron-$v" megatron-core "$v" megatron/
  done
}
# Megatron-Bridge, every release on PyPI (0.3.0, the oldest, and 0.3.1): each wheel (Python
# sources, 0.8 MB) unpacked whole into VENV/share/fp8a/megatron-bridge-<v>, not installed (its
# package imports TE's library and transformers), and the three packages its override code needs
# (omegaconf, hydra-core, antlr4 runtime: 3.6 MB) into VENV/share/fp8a/bridge-deps, for
# run_checks.py bridge / bridge_oldest (tests/consumers/check_bridge.py).
bridge_versions="0.3.0 0.3.1"
bridge_deps="omegaconf==2.3.0 hydra-core==1.3.2 antlr4-python3-runtime==4.9.3"
install_bridge() {
  local v deps="$venv/share/fp8a/bridge-deps"
  if [ ! -f "$deps/.fp8a-stamp" ] || [ "$(cat "$deps/.fp8a-stamp")" != "$bridge_deps" ]; then
    rm -rf "$deps"
    # shellcheck disable=SC2086  # one word per requirement
    "$venv/bin/python" -m pip --disable-pip-version-check -q install --no-deps --target "$deps" $bridge_deps
    printf '%s\n' "$bridge_deps" > "$deps/.fp8a-stamp"
  fi
  for v in $bridge_versions; do
    unpack_wheel "$venv/share/fp8a/megatron-bridge-$v" megatron-bridge "$v"
  done
}
if [ -f "$venv/.fp8a-stamp" ] && [ "$(cat "$venv/.fp8a-stamp")" = "$stamp" ]; then
  if [ ! -f "$venv/.fp8a-capture-stamp" ] || [ "$(cat "$venv/.fp8a-capture-stamp")" != "$capture_stamp" ]; then
    echo "== reinstalling python/ into $venv"
    install_capture
  fi
  install_te_oldest
  install_megatron_olders
  install_bridge
  exit 0
fi
start=$(date +%s)
echo "== creating $venv (consumer checks)"
rm -rf "$venv"
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
constraints=()
[ -f "$con" ] && constraints=(-c "$con")
"${pip[@]}" install -r "$req" "${constraints[@]}"
dl=$(mktemp -d)
trap 'rm -rf "$dl"' EXIT
install_capture
"${pip[@]}" download --no-deps --only-binary=:all: -d "$dl" "transformer-engine==$te_version"
"${pip[@]}" download --no-deps --only-binary=:all: --python-version 3.12 -d "$dl" \
  "megatron-core==$megatron_version"
mkdir -p "$venv/share/fp8a/te"
"$venv/bin/python" - "$dl" "$venv" <<'PY'
import pathlib, sys, sysconfig, zipfile
dl, venv = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
zipfile.ZipFile(next(dl.glob("transformer_engine-*.whl"))).extractall(venv / "share/fp8a/te")
site = pathlib.Path(sysconfig.get_paths()["purelib"])
with zipfile.ZipFile(next(dl.glob("megatron_core-*.whl"))) as z:
    for n in z.namelist():
        if n.startswith("megatron/") and not n.endswith(".so"):
            z.extract(n, site)
PY
install_te_oldest
install_megatron_olders
install_bridge
printf '%s\n' "$stamp" > "$venv/.fp8a-stamp"
echo "== $venv ready in $(( $(date +%s) - start )) s, $(du -sh "$venv" | cut -f1)"
