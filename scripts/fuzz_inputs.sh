#!/usr/bin/env bash
# Coverage-guided fuzzing of fp8-advisor's input readers (tests/fuzz/fuzz_inputs.cpp): safetensors,
# .npy, .npz, torch.save (dicts and Transformer Engine DumpTensors dumps), CSV amax traces,
# nvdlfw_inspect logs and --recipes lists, built with clang's libFuzzer, ASan and UBSan. Every
# input must load or fail with an fp8a input error (usage error for --recipes); anything else
# stops the run and leaves the input as crash-* in the work directory (reproduce:
# build/fuzz/fuzz_inputs build/fuzz/crash-..., or build/tests/fuzz_inputs_replay with any compiler).
#
#   bash scripts/fuzz_inputs.sh [SECONDS] [JOBS]     (default 300 s, 1 job; needs clang++ >= 14)
#
# Not part of CI (it runs for minutes by design); tests/datasets/test_mutations.cpp is the CI
# counterpart. Seeds: the NumPy and torch.save fixtures written by the real tools (tests/golden),
# a safetensors file, a CSV trace and an nvdlfw_inspect log, each behind the first byte that picks
# its reader (fuzz_inputs.cpp's kTargets). The corpus in build/fuzz/corpus is kept between runs;
# delete it when kTargets changes.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-300}
jobs=${2:-1}
work=${FUZZ_DIR:-build/fuzz}
cxx=${CXX_FUZZ:-clang++}
mkdir -p "$work/corpus"

sources=(tests/fuzz/fuzz_inputs.cpp datasets/file_system.cpp datasets/safetensors.cpp
         datasets/capture.cpp datasets/training_log.cpp datasets/npy.cpp datasets/stored_zip.cpp
         datasets/torch_zip.cpp core/error.cpp core/recipe.cpp)
bin=$work/fuzz_inputs
if [ ! -x "$bin" ] || [ -n "$(find "${sources[@]}" datasets/*.hpp core/*.hpp tests/support/in_file.hpp -newer "$bin" | head -n 1)" ]; then
  echo "== build $bin ($cxx, libFuzzer + ASan + UBSan)"
  "$cxx" -std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -I. "${sources[@]}" -o "$bin"
fi

echo "== seeds"
rm -rf "$work/seeds"
python3 - "$work/seeds" <<'PY'
import glob, json, os, struct, sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
# The first byte picks the reader: the indices of kTargets in tests/fuzz/fuzz_inputs.cpp.
# The .npy, .npz and torch.save seeds go to their parser alone and to load_captures.
SAFETENSORS, NPY, NPZ, PT, TE_DUMP, CSV, NVDLFW, CAP_NPY, CAP_NPZ, CAP_PT, RECIPES = range(11)

def write(name, target, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([target]) + data)

for pattern, kinds in (("tests/golden/npy/*.npy", (NPY, CAP_NPY)), ("tests/golden/npy/*.npz", (NPZ, CAP_NPZ)),
                       ("tests/golden/torch/*.pt", (PT, CAP_PT))):
    for p in sorted(glob.glob(pattern)):
        for k in kinds:
            write("%d-%s" % (k, os.path.basename(p)), k, open(p, "rb").read())
for p in sorted(glob.glob("tests/golden/torch/tensor_dumps/rank_0/*.pt")):
    write("te-" + os.path.basename(p), TE_DUMP, open(p, "rb").read())

def safetensors(tensors, metadata):
    header, blobs, offset = {"__metadata__": metadata}, b"", 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs += raw
        offset += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + blobs

bf16 = lambda xs: b"".join(struct.pack("<f", x)[2:] for x in xs)
f32 = lambda xs: b"".join(struct.pack("<f", x) for x in xs)
f16 = lambda xs: b"".join(struct.pack("<e", x) for x in xs)
write("st-small.safetensors", SAFETENSORS, safetensors(
    [("layers.0.fc1.activation", "BF16", [2, 3], bf16([1, -2, 3, 0.5, 0, 7])),
     ("layers.0.fc1.weight", "F32", [3, 3], f32(range(1, 10))),
     ("layers.0.fc1.gradient", "F16", [2, 3], f16([1e-3, -2e-4, 3, 0, 6e-8, 1]))],
    {"step": "7", "rank": "0"}))
write("trace.csv", CSV, b"step,tensor,amax\n0,l.activation,1.5\n1,\"l.weight\",2\n2,l.gradient,1e-30\n")
write("rank0.log", NVDLFW,
      b"2025 - INFO - l_activation_cur_amax \t iteration=000001 \t value=1.5000\n"
      b"l_gradient_mxfp8_underflows%_columnwise iteration=000002 value=0.2500\n"
      b"l_weight_fp8_block_scaling_scale_inv_min iteration=000002 value=0.0001\n"
      b"l_weight_fp8_current_scaling_mse iteration=000003 value=1.0000\n")
write("recipes-default", RECIPES, b"current,current:pow2,delayed,delayed:history=16:algo=most_recent,"
      b"block,block:fp32,mxfp8,mxfp8:floor,bf16")
write("recipes-options", RECIPES, b"current:eps=1e-12,delayed:history=4:algo=max:margin=2,block:2d,delayed:margin=1")
print("%d seeds in %s" % (len(os.listdir(out)), out))
PY

# Tokens the readers branch on: pickle opcodes and torch names, JSON, the npy header, zip magic.
cat >"$work/inputs.dict" <<'DICT'
"\x80\x02"
"\x80\x04"
"ctorch._utils\x0a_rebuild_tensor_v2\x0a"
"ctorch\x0aBFloat16Storage\x0a"
"ctorch\x0aFloatStorage\x0a"
"ccollections\x0aOrderedDict\x0a"
"X\x0e\x00\x00\x00high_precision"
"q\x00"
"h\x00"
"}"
"]"
"("
"t"
"R"
"b"
"."
"s"
"u"
"\x93NUMPY"
"'descr':"
"'fortran_order':"
"'shape':"
"<V2"
"<f4"
"PK\x03\x04"
"PK\x01\x02"
"PK\x05\x06"
"data_offsets"
"dtype"
"shape"
"__metadata__"
"BF16"
"iteration="
"value="
"_cur_amax"
"step,tensor,amax"
"history="
"algo="
"margin="
"eps="
"most_recent"
"pow2"
"mxfp8"
"delayed"
DICT

echo "== fuzz for ${seconds}s with $jobs job(s); findings: $work/crash-* (or leak-*, timeout-*, oom-*)"
# The corpus grows in $work/corpus (kept between runs); the seeds are read, not written.
extra=()
if [ "$jobs" -gt 1 ]; then extra=(-fork="$jobs"); fi
rm -f "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*
set +e
"$bin" "$work/corpus" "$work/seeds" -dict="$work/inputs.dict" -max_total_time="$seconds" \
  -max_len=16384 -timeout=10 -rss_limit_mb=4096 -artifact_prefix="$work/" -print_final_stats=1 \
  "${extra[@]}" >"$work/fuzz.log" 2>&1
rc=$?
set -e
grep -vE "^#[0-9]+.*(NEW|REDUCE|pulse)" "$work/fuzz.log" | tail -n 40
if ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* 2>/dev/null; then
  echo "FINDINGS above (log: $work/fuzz.log)"
  exit 1
fi
if [ $rc -ne 0 ]; then
  echo "the fuzzer exited $rc without a finding (log: $work/fuzz.log)"
  exit 1
fi
echo "no findings ($(ls "$work/corpus" | wc -l) inputs in the corpus)"
