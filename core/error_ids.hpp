// The error ids: one row per id, with its kind (and so its exit code) and a one-line meaning.
//
// This table is the only list. docs/ERRORS.md's table shows the same rows, word
// for word (tests/core/test_error_ids.cpp checks both ways); usage_error/input_error/internal_error
// (core/error.hpp) accept only an id of this table with their kind, at compile time.
// A new id: add its row here, in its family's block, and the same row to docs/ERRORS.md.
#pragma once

#include <span>
#include <string_view>

namespace fp8a {

enum class ErrorKind {
  kUsage,     // bad command line, or a device that cannot run it: exit 2
  kInput,     // bad input data or unreadable/unwritable file: exit 3
  kInternal,  // a bug, or a failure of the CUDA runtime or cuBLASLt: exit 1
};

// kExitGate: `run` finished and wrote its files, and a gate it was given failed (--expect-plan,
// --min-fp8-share, --strict): for CI jobs that must notice a changed plan or an incomplete one.
enum ExitCode : int { kExitOk = 0, kExitInternal = 1, kExitUsage = 2, kExitInput = 3, kExitGate = 4 };

constexpr int exit_code_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kUsage: return kExitUsage;
    case ErrorKind::kInput: return kExitInput;
    case ErrorKind::kInternal: break;
  }
  return kExitInternal;
}

struct ErrorIdRow {
  std::string_view id;       // "fp8a.<family>.<number>", as it appears between brackets in a message
  ErrorKind kind;            // one kind per family
  std::string_view meaning;  // docs/ERRORS.md's text for the id (Markdown), one line
};

namespace detail {
using enum ErrorKind;
inline constexpr ErrorIdRow kErrorIdRows[] = {
    {"fp8a.usage.201", kUsage, "bad recipe spec (unknown kind or option, bad `eps`, empty list entry)"},
    {"fp8a.usage.202", kUsage, "bad `--format` entry (`e4m3` or `hybrid`; `e5m2` alone is not a TE recipe format)"},
    {"fp8a.usage.203", kUsage, "bad command line: unknown or missing option, bad value"},
    {"fp8a.usage.204", kUsage, "missing or unknown command"},
    {"fp8a.usage.205", kUsage, "bad `--threads` or `--progress-every` (a finite number >= 0)"},
    {"fp8a.usage.206", kUsage, "bad `--device`, or `--device cuda` without a CUDA build or GPU"},
    {"fp8a.usage.207", kUsage, "bad `--npy-dtype` (the only value is `bf16`)"},
    {"fp8a.usage.208", kUsage, "bad `--amax-reduction` (`tp` or `none`)"},
    {"fp8a.usage.209", kUsage, "`synth`: unknown `--preset`"},
    {"fp8a.usage.210", kUsage, "`synth`: bad `--steps` (comma-separated integers 0..10000000)"},
    {"fp8a.usage.211", kUsage, "`--training-recipe` is not one of `--recipes`, or is given without `--training-log`"},
    {"fp8a.usage.212", kUsage,
     "`--device cuda`: the GPU has too little free memory for the CUDA backend (amounts named)"},
    {"fp8a.usage.213", kUsage,
     "`--policy` is neither a preset (`default`, `te-autoswitch`) nor an existing file"},
    {"fp8a.usage.214", kUsage, "unknown `--gpu` name (with \"did you mean\" and the known names)"},
    {"fp8a.usage.215", kUsage, "bad `--cost` (`roofline` or `none`) or `--tokens-per-step` (a finite number >= 0)"},
    {"fp8a.usage.216", kUsage,
     "`whatif`: `--layer` is not a valid RE2 regular expression (no lookaround or backreferences; at most 8 MiB compiled), or matches no captured layer (with \"did you mean\")"},
    {"fp8a.usage.217", kUsage, "`whatif`: no tensor of the matched layers was captured at `--step` (the captured steps named)"},
    {"fp8a.usage.218", kUsage, "`compare`: not exactly two inputs (BASE and CAND)"},
    {"fp8a.usage.219", kUsage,
     "`compare`: `--base-training-log` or `--cand-training-log` given for a side that is a run folder"},
    {"fp8a.usage.220", kUsage,
     "`--out` is in use by another live fp8-advisor (its pid and command named; a dead run's lock is taken over)"},
    {"fp8a.usage.225", kUsage, "bad `--gemm-rows` (`auto`, `0` for all rows, or a number of rows: tokens, dW rows for wgrad)"},
    {"fp8a.usage.227", kUsage,
     "bad `FP8A_CPU_ISA` (`baseline`, `v3` or `v4`), or a CPU code path this CPU lacks (the paths it runs named)"},
    {"fp8a.usage.229", kUsage,
     "`fp8-advisor` launched as several MPI ranks (`mpirun`, `srun`) but built without MPI (`FP8A_WITH_MPI=OFF`)"},
    {"fp8a.usage.230", kUsage,
     "an MPI rank does not see the same options, captures or training logs as rank 0 (the rank and the first difference named)"},
    {"fp8a.usage.231", kUsage,
     "a command other than `run` launched as several MPI ranks (only `run` spreads its work over ranks)"},
    {"fp8a.usage.240", kUsage,
     "an MPI rank did not answer an exchange within `--rank-timeout` (stopped, hung or far behind; the ranks named): the job is ended"},
    {"fp8a.usage.241", kUsage, "bad `--rank-timeout` (a number of seconds > 0)"},
    {"fp8a.usage.242", kUsage,
     "bad `--te-version` (a Transformer Engine release X.Y or X.Y.Z in the supported range, named)"},
    {"fp8a.usage.243", kUsage, "bad `--out` (an empty path, or a symbolic link to nothing)"},
    {"fp8a.usage.244", kUsage, "bad `--min-fp8-share` (a number from 0 to 1)"},
    {"fp8a.usage.245", kUsage,
     "bad `--price-as` (neither a preset, `llama-7b` or `llama-70b`, nor an existing shapes file), or given with `--cost none`"},
    {"fp8a.usage.246", kUsage,
     "`--price-as`: a captured layer has no module role (qkv, proj, fc1, fc2, head) the target prices (the layer named; a shapes file's `names` can map it)"},
    {"fp8a.usage.247", kUsage,
     "bad `log-config` option: `--freq` (1 to 1000000), `--start-step`/`--end-step` (0 <= start <= end, or end -1), `--layers` (one line of UTF-8, 1 to 1000 bytes), a `--training-recipe` that does not train on `--gpu` or `--te-version`"},
    {"fp8a.io.101", kInput, "capture path does not exist"},
    {"fp8a.io.102", kInput, "file cannot be opened or mapped, or is not a regular file/directory"},
    {"fp8a.io.103", kInput, "directory holds no captures (`*.safetensors`, `*.npy`, `*.npz`, `*.pt`)"},
    {"fp8a.io.104", kInput, "output directory or file cannot be written"},
    {"fp8a.io.106", kInput, "a text file (`.csv`, `.log`, `.txt`, `.json`) given as a capture"},
    {"fp8a.io.107", kInput, "`--expect-plan`: the file cannot be read or is not a recipe.json"},
    {"fp8a.io.105", kInput,
     "`compare`: the `metrics.csv` of an earlier `run --out` folder is malformed (file, line and column named)"},
    {"fp8a.io.110", kInput,
     "a capture changed while the run read it: truncated or rewritten in place (the file and both versions named)"},
    {"fp8a.io.120", kInput,
     "an earlier run folder holds a mixed set of output files: a run was stopped while switching its files in (a file that is not that run's named)"},
    {"fp8a.io.121", kInput,
     "a file of an earlier run folder is missing or differs from the folder's manifest `.fp8-advisor-outputs-run.json` (the file named)"},
    {"fp8a.io.122", kInput, "an output folder's manifest `.fp8-advisor-outputs-<set>.json` is malformed"},
    {"fp8a.safetensors.301", kInput, "file shorter than 8 bytes"},
    {"fp8a.safetensors.302", kInput, "header length over 100,000,000 bytes (not a safetensors file)"},
    {"fp8a.safetensors.303", kInput, "header runs past the end of the file"},
    {"fp8a.safetensors.304", kInput, "header is not valid UTF-8 JSON, or not an object"},
    {"fp8a.safetensors.305", kInput, "tensor entry malformed (dtype, shape, data_offsets)"},
    {"fp8a.safetensors.306", kInput, "`__metadata__` is not an object of strings"},
    {"fp8a.safetensors.307", kInput, "unknown dtype"},
    {"fp8a.safetensors.308", kInput, "data offsets with a gap, an overlap, or end before begin"},
    {"fp8a.safetensors.309", kInput, "byte size differs from shape × dtype size, or overflows"},
    {"fp8a.safetensors.310", kInput, "data truncated, or trailing bytes after the last tensor"},
    {"fp8a.safetensors.311", kInput, "duplicate tensor name"},
    {"fp8a.capture.401", kInput, "dtype valid in safetensors but not a capture type (BF16, F16, F32)"},
    {"fp8a.capture.402", kInput, "empty tensor"},
    {"fp8a.capture.403", kInput, "tensor name is not `<layer>.<role>`"},
    {"fp8a.capture.404", kInput, "the same (step, layer, role) in two files without distinct ranks"},
    {"fp8a.capture.405", kInput, "`__metadata__[\"step\"]` is not a non-negative integer"},
    {"fp8a.capture.406", kInput, "NaN/Inf in a tensor with `--fail-on-nonfinite`"},
    {"fp8a.capture.407", kInput, "TE tensor dump without a `high_precision` tensor"},
    {"fp8a.capture.408", kInput, "`__metadata__[\"rank\"]` is not a non-negative integer"},
    {"fp8a.capture.410", kInput, "tensor name longer than 4096 bytes"},
    {"fp8a.capture.411", kInput, "`__metadata__[\"tokens_per_step\"]` is not an integer from 1 to 10^12"},
    {"fp8a.capture.412", kInput, "two files of the capture record different tokens per step"},
    {"fp8a.capture.413", kInput, "`fp8a_capture.json` is not `{\"tokens_per_step\": N}`"},
    {"fp8a.npy.601", kInput, "not an `.npy` file (magic, version)"},
    {"fp8a.npy.602", kInput, "bad `.npy` header (the position is named)"},
    {"fp8a.npy.603", kInput,
     "unsupported `.npy` dtype or layout (float64, big-endian, object, structured, Fortran order; "
     "2-byte void/uint16 without `--npy-dtype bf16`)"},
    {"fp8a.npy.604", kInput,
     "`.npy` data size differs from the header's shape (truncated, trailing bytes, overflow)"},
    {"fp8a.npy.605", kInput, "bad `.npz` zip structure"},
    {"fp8a.npy.606", kInput, "compressed `.npz` member (use `np.savez`)"},
    {"fp8a.torch.701", kInput,
     "not a zip-format `torch.save` archive (legacy format, no `data.pkl`, bad zip)"},
    {"fp8a.torch.702", kInput, "malformed or oversized pickle (opcode and byte named)"},
    {"fp8a.torch.703", kInput, "pickle global outside the allow-list (named; nothing is run)"},
    {"fp8a.torch.704", kInput, "tensor not contiguous, or its storage out of bounds"},
    {"fp8a.torch.705", kInput, "compressed or encrypted archive member"},
    {"fp8a.torch.706", kInput, "no BF16/F16/F32 tensor in the file"},
    {"fp8a.trace.501", kInput,
     "`--training-log` file is neither a `step,tensor,amax` CSV nor an nvdlfw_inspect statistics log"},
    {"fp8a.trace.502", kInput,
     "malformed trace line (field count, quotes, missing `iteration=`/`value=`)"},
    {"fp8a.trace.503", kInput,
     "bad number in a trace (step not a non-negative integer, amax negative or not a float32, a logged percentage outside 0..100 or a negative std, mse or scale)"},
    {"fp8a.trace.504", kInput, "trace tensor name is not `<layer>.<role>`"},
    {"fp8a.trace.505", kInput,
     "the same (tensor, step) twice in one trace file (several files, e.g. ranks, merge by max)"},
    {"fp8a.trace.506", kInput, "trace file holds no amax entries"},
    {"fp8a.trace.507", kInput, "`run --training-log` without `--capture`: the log holds no LogFp8TensorStats statistic a recipe can be judged on"},
    {"fp8a.trace.508", kInput, "an nvdlfw_inspect log's iterations go back: a line of an earlier step after a later one's (TE writes each rank's log in step order; the logs are read step by step)"},
    {"fp8a.compare.101", kInput,
     "`compare`: an input holds no evaluated tensor under the `--recipes` and `--format` lists (the input named)"},
    {"fp8a.compare.102", kInput,
     "`compare`: no (layer, tensor, recipe, format, orientation) of BASE is in CAND (both named), or two "
     "run folders evaluated in formats they do not share (without `--format`; sharing some, `compare` says "
     "which it compares)"},
    {"fp8a.policy.901", kInput, "policy file is not valid JSON (also: not UTF-8 text, with the encoding or the byte offset named), or not a JSON object"},
    {"fp8a.policy.902", kInput,
     "policy file: unknown key (the key named, with \"did you mean\"), or an object of over 1000 keys (named)"},
    {"fp8a.policy.903", kInput, "policy file: a value of the wrong type (the key named)"},
    {"fp8a.policy.904", kInput,
     "policy file: a value out of range (a number beyond a double's range too), or not one of the names allowed (the key named)"},
    {"fp8a.policy.905", kInput, "policy file: a key given twice in one object (the key named)"},
    {"fp8a.shapes.951", kInput,
     "shapes file (`--price-as FILE`) is not valid JSON (also: not UTF-8 text, with the encoding or the byte offset named), or not a JSON object"},
    {"fp8a.shapes.952", kInput,
     "shapes file: unknown or missing key (the key named, with \"did you mean\"), or an object of over 1000 keys (named)"},
    {"fp8a.shapes.953", kInput,
     "shapes file: a value of the wrong type (the key named)"},
    {"fp8a.shapes.954", kInput,
     "shapes file: a value out of range (the key named)"},
    {"fp8a.shapes.955", kInput,
     "shapes file: a key given twice in one object (the key named)"},
    {"fp8a.cuda.801", kInternal,
     "a CUDA runtime call failed (out of device memory, driver error); the message names the call"},
    {"fp8a.cuda.802", kInternal,
     "a cuBLASLt call failed (`--device cuda` GEMMs); the message names the layer, step, GEMM, "
     "recipe, call and status"},
    {"fp8a.cuda.803", kInternal,
     "`--device cuda`: out of device memory for a tensor's buffers even after retrying with "
     "chunks down to 128x128 elements (the tensor's shape and the memory free named)"},
    {"fp8a.internal.001", kInternal, "an internal invariant failed (a bug: please report it)"},
    {"fp8a.internal.002", kInternal, "out of host memory"},
    {"fp8a.internal.003", kInternal,
     "an unexpected exception reached `main` (a bug: please report it with the message)"},
    {"fp8a.internal.004", kInternal, "an MPI call failed (the call and MPI's error string named)"},
    {"fp8a.internal.005", kInternal,
     "the units of work exchanged between MPI ranks are incomplete or do not decode (a bug: please report it)"},
};
}  // namespace detail

// Every id, in docs/ERRORS.md's order.
inline constexpr std::span<const ErrorIdRow> kErrorIds = detail::kErrorIdRows;

// The row of `id`, or nullptr.
constexpr const ErrorIdRow* find_error_id(std::string_view id) {
  for (const ErrorIdRow& row : kErrorIds)
    if (row.id == id) return &row;
  return nullptr;
}

}  // namespace fp8a
