#!/usr/bin/env bash
# Every output of `run` (and of whatif/compare) on the shipped captures and the synth presets, at
# 1 and 2 threads and under mpirun, into one folder, so a refactoring can be shown byte-identical:
#
#   scripts/snapshot-outputs.sh build/cli/fp8-advisor /tmp/before
#   ... change the code, rebuild ...
#   scripts/snapshot-outputs.sh build/cli/fp8-advisor /tmp/after
#   diff -r /tmp/before /tmp/after
#
# SNAPSHOT_WORK (default /tmp/fp8a-snapshot) is the scratch folder; give each concurrent
# snapshot its own. summary.json loses its "timings_s" (the one field that differs by design) and the output
# manifest (.fp8-advisor-outputs-run.json, whose hashes cover summary.json) and the checkpoint
# are left out. Every run writes into the same --out path, moved away afterwards, because the
# provenance names --out.
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bin=$(realpath "$1")
dest=$2
src=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$dest"
mkdir -p "$dest"
# Fixed paths, as the outputs name them (the command line names the binary): two snapshots
# compare only with the same SNAPSHOT_WORK.
work=${SNAPSHOT_WORK:-/tmp/fp8a-snapshot}
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
cp "$bin" "$work/fp8-advisor"
bin=$work/fp8-advisor
mkdir -p "$work/data" && cp -r "$src/datasets/sample" "$src/datasets/real" "$work/data/"
src=$work/data
out=$work/out

keep() {  # keep NAME: move $out's outputs to $dest/NAME
  local name=$1
  rm -rf "$out/.fp8-advisor-checkpoint" "$out"/.fp8-advisor-outputs-*.json
  if [ -f "$out/summary.json" ]; then
    python3 - "$out/summary.json" <<'EOF'
import json, sys
p = sys.argv[1]
j = json.load(open(p, encoding="utf-8"))
j.pop("timings_s", None)
open(p, "w", encoding="utf-8").write(json.dumps(j, indent=1, sort_keys=True, ensure_ascii=False))
EOF
  fi
  mv "$out" "$dest/$name"
}

one() {  # one NAME ARGS...: fp8-advisor ARGS --out $out, stdout/stderr/rc kept
  local name=$1
  shift
  mkdir -p "$work/io"
  local to=(--out "$out")
  [ "$1" = whatif ] && to=()
  set +e
  "$bin" "$@" "${to[@]}" >"$work/io/stdout" 2>"$work/io/stderr" </dev/null
  echo $? >"$work/io/rc"
  set -e
  mkdir -p "$out"
  # progress lines carry timings; keep stderr without them
  grep -v -e '^progress' -e '\[.*s\]' "$work/io/stderr" >"$out/stderr.txt" || true
  mv "$work/io/stdout" "$out/stdout.txt"
  mv "$work/io/rc" "$out/rc.txt"
  keep "$name"
}

mpi() {  # mpi N NAME ARGS...
  local n=$1 name=$2
  shift 2
  mkdir -p "$work/io"
  set +e
  mpirun --oversubscribe --bind-to none -n "$n" "$bin" "$@" --out "$out" >"$work/io/stdout" 2>"$work/io/stderr" </dev/null
  echo $? >"$work/io/rc"
  set -e
  mkdir -p "$out"
  mv "$work/io/stdout" "$out/stdout.txt"
  mv "$work/io/rc" "$out/rc.txt"
  keep "$name"
}

sample=(run --capture "$src/sample" --training-log "$src/sample/amax_trace.csv" --quiet)
spike=(run --capture "$src/real/lm-spike" --training-log "$src/real/lm-spike/amax_trace_rank0.csv" --quiet)
sane=(run --capture "$src/real/lm-sane" --training-log "$src/real/lm-sane/amax_trace_rank0.csv" --quiet)

for t in 1 2; do
  one "sample-t$t" "${sample[@]}" --threads $t
  one "lm-spike-t$t" "${spike[@]}" --threads $t
done
one lm-sane "${sane[@]}" --threads 2
one lm-sane-delayed "${sane[@]}" --threads 2 --recipes delayed,bf16 --format hybrid --cost none
one lm-spike-current "${spike[@]}" --threads 2 --recipes current,bf16 --format hybrid
one sample-cost-none "${sample[@]}" --threads 2 --cost none
one sample-b200 "${sample[@]}" --threads 2 --gpu b200 --tokens-per-step 1048576
one sample-autoswitch "${sample[@]}" --threads 2 --policy te-autoswitch
one sample-no-gemms "${sample[@]}" --threads 2 --no-gemms
# NVFP4 and the three-tier plan (issue 39): the numbers alone, and on B300's roofline.
one lm-spike-nvfp4 "${spike[@]}" --threads 2 --recipes nvfp4,mxfp8,bf16 --gpu b200 --cost none
one sample-nvfp4-b300 "${sample[@]}" --threads 2 --recipes nvfp4,mxfp8,bf16 --gpu b300 --tokens-per-step 1048576
mpi 2 sample-mpi2 "${sample[@]}"
mpi 2 lm-spike-mpi2 "${spike[@]}"

for p in outlier-growth wide-gradient sensitive-ends healthy all sample; do
  "$bin" synth --preset "$p" --out "$work/synth-$p" >/dev/null
  trace=()
  [ -f "$work/synth-$p/amax_trace.csv" ] && trace=(--training-log "$work/synth-$p/amax_trace.csv")
  for t in 1 2; do
    one "synth-$p-t$t" run --capture "$work/synth-$p" "${trace[@]}" --threads $t --quiet
  done
done

one whatif-sample whatif --capture "$src/sample" --layer 'layers\.1\..*' --recipe current,block
cp -r "$dest/sample-t1" "$work/base" && cp -r "$dest/sample-cost-none" "$work/cand"
one compare-sample compare "$work/base" "$work/cand"
# the build's git revision is not the code's behaviour
rev=$("$bin" --version | grep -oE '[0-9a-f]{12}' | head -1 || true)
[ -n "$rev" ] && grep -rl "$rev" "$dest" | xargs -r sed -i "s/$rev/REV/g"
echo "snapshot in $dest: $(find "$dest" -type f | wc -l) files"
