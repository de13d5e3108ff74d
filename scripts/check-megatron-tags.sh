#!/usr/bin/env bash
# Runs megatron_args.txt's checker (tests/consumers/check_megatron_args.py) against Megatron-LM
# releases whose argument parser (megatron/training) is on no package index: the megatron/ tree of
# each tag, taken from a Megatron-LM git clone, ahead of the consumer venv's Megatron-Core.
#   bash scripts/check-megatron-tags.sh MEGATRON_LM_CLONE [TAG ...]
# default tags: core_v0.13.1 core_v0.16.1 core_v0.17.1 core_v0.18.0 (docs/VERSIONS.md records what
# they gave). Needs build/consumers-venv (scripts/consumers-env.sh) and the network for two
# packages those trees import that the venv lacks (six, regex). Prints each checker's line;
# exits 1 when one differs from what docs/VERSIONS.md claims.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
clone=$1
shift
tags=("$@")
[ ${#tags[@]} -gt 0 ] || tags=(core_v0.13.1 core_v0.16.1 core_v0.17.1 core_v0.18.0)
venv=build/consumers-venv
[ -x "$venv/bin/python" ] || { echo "no $venv: run scripts/consumers-env.sh" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" -m pip --disable-pip-version-check -q install --no-deps --target "$work/extra" six regex
G=tests/golden/reports
S=tests/consumers/samples/megatron_args
# file [companion] | the claim: "ok" from which release on
cases=(
  "$G/megatron_args_mixed.txt $G/te_precision_config_mixed.yaml|0.16"
  "$G/megatron_args_delayed.txt $G/te_precision_config_delayed.yaml|0.16"
  "$G/megatron_args_block.txt $G/te_precision_config_block.yaml|0.16"
  "$G/megatron_args_all_bf16.txt|0.13"
  "$S/good_args.txt|0.13"
  "$S/good_delayed.txt|0.13"
  "$S/good_output_proj.txt|0.18"
)
bad=0
for tag in "${tags[@]}"; do
  src="$work/$tag"
  mkdir -p "$src"
  git -C "$clone" archive "$tag" megatron | tar x -C "$src"
  minor=$(echo "$tag" | sed -n 's/^core_v0\.\([0-9]*\)\..*/\1/p')
  echo "== $tag"
  for c in "${cases[@]}"; do
    files=${c%|*}
    since=${c#*|}
    # shellcheck disable=SC2086  # file and companion: two words
    line=$(cd tests/consumers && PYTHONPATH="$work/extra" FP8A_MEGATRON_SRC="$src" TORCH_CPP_LOG_LEVEL=ERROR \
           "../../$venv/bin/python" check_megatron_args.py $(for f in $files; do echo "../../$f"; done) 2>/dev/null || true)
    want=FAIL
    [ "$minor" -ge "${since#0.}" ] && want=OK
    mark=ok
    [ "${line%%:*}" = "$want" ] || { mark=DIFFERS; bad=1; }
    echo "$mark  $(basename "${files%% *}") (claimed from $since): ${line:0:200}"
  done
done
exit $bad
