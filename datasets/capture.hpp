// A capture: high-precision GEMM operands keyed by (step, layer, role).
//
// Tensor names in a file are "<layer>.<role>" (e.g. "layers.3.linear_fc2.activation"), role being
// activation (GEMM input X), weight (W, [out, in]) or gradient (dY). The step comes from the file's
// __metadata__["step"], else the last number in the file name, else 0.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "datasets/file_system.hpp"
#include "datasets/npy.hpp"
#include "core/recipe.hpp"
#include "core/tensor_view.hpp"

namespace fp8a {

struct CaptureKey {
  std::int64_t step = 0;
  std::string layer;
  Role role = Role::kActivation;
  bool operator==(const CaptureKey&) const = default;
};

// Orders by step, then layer in natural order ("layers.2" before "layers.10"), then role.
bool operator<(const CaptureKey& a, const CaptureKey& b);

// Natural string order: runs of digits compare by value.
bool natural_less(std::string_view a, std::string_view b);

struct CapturedTensor {
  CaptureKey key;
  // Tensor-parallel rank of this shard: __metadata__["rank"], else a folder named rank_<R> or
  // rank<R> (TE's tensor_dumps/rank_R, our hook's files), else -1. Several ranks of one key are
  // shards of one tensor (engine/run.hpp evaluates them together).
  int rank = -1;
  std::string file;         // path it was read from
  std::string file_identity;  // the file's MappedFile::identity() when it was read
  std::string tensor_name;  // name inside the file
  TensorView view;          // points into the mapped file
};

struct CaptureFile {
  std::string path;
  std::int64_t step = 0;
  int rank = -1;
  std::string step_source;  // "metadata", "file name", "folder name" or "default"
  std::string note;         // e.g. why nothing was taken from it
  std::size_t tensor_count = 0;
  std::uint64_t bytes = 0;
  std::string identity;  // MappedFile::identity()
};

// The most tokens a step may have: 10^12, far beyond any training run (Llama 3's largest step was
// 1.6e7 tokens); beyond it the cost model's sums lose meaning.
inline constexpr std::int64_t kMaxTokensPerStep = 1'000'000'000'000;

// The name of the file that describes a capture folder, for captures that cannot carry it in
// their own metadata (TE's tensor dumps, .npy): a JSON object {"tokens_per_step": N}.
inline constexpr std::string_view kCaptureDescriptionName = "fp8a_capture.json";

// How many tokens one training step runs through each layer (the global batch times the sequence
// length, over every data-parallel rank), as the capture records it: a safetensors
// __metadata__["tokens_per_step"] (fp8a_capture writes it) or a fp8a_capture.json. The cost model
// prices the GEMMs at it; the captured tensors are usually one micro-batch of it.
struct CaptureTokens {
  std::int64_t tokens_per_step = 0;  // 0: the capture does not say
  std::string file;                  // the first file (in path order) that says it
  std::string how;                   // "given" or "counted" (fp8a_capture's metadata), else empty
};

struct CaptureSet {
  std::vector<CaptureFile> files;
  CaptureTokens tokens;  // every file that records it agrees (else fp8a.capture.412)
  std::vector<CapturedTensor> tensors;  // sorted by key
  // Keeps the mappings alive as long as the views are used.
  std::vector<std::shared_ptr<const MappedFile>> mappings;
};

// Splits "<layer>.<role>"; false when the name has no known role suffix or an empty layer.
bool split_tensor_name(const std::string& name, std::string* layer, Role* role);

struct CaptureOptions {
  NpyRawDType npy_dtype = NpyRawDType::kNone;  // --npy-dtype bf16: 2-byte void/uint16 is BF16
};

// Reads files and directories (recursively) into one capture set, with a fp8a_capture.json found
// there or named (kCaptureDescriptionName). Formats, by extension:
//   .safetensors  tensors named <layer>.<role>; step from __metadata__["step"], else the last
//                 number in the file name, else 0;
//   .npz          members named <layer>.<role>; step from the file name;
//   .npy          one array; the file name (without .npy) is <layer>.<role>, the step the last
//                 number in the folder name (e.g. step_000100/layers.0.fc1.activation.npy);
//   .pt           torch.save files: TE DumpTensors dumps iter_<N>/<layer>_<tensor>.pt (TE 2.15+;
//                 also the pre-release <layer>_<tensor>_iter_<N>.pt): the "high_precision"
//                 tensor, step N, tensors other than activation/weight/gradient skipped; or
//                 dicts of <layer>.<role> tensors (step from the file name).
// Throws input errors fp8a.io.1xx, fp8a.safetensors.3xx, fp8a.npy.6xx, fp8a.torch.7xx,
// fp8a.capture.4xx (see docs/ERRORS.md).
CaptureSet load_captures(const std::vector<std::string>& paths, const FileSystem& fs,
                         const CaptureOptions& options = {});

// What a capture lacks: of its (step, layer) pairs, how many hold no tensor of each role (indexed
// by Role). A capture taken under torch.no_grad() (or before backward) has no gradient at all.
struct MissingRoles {
  std::size_t layer_steps = 0;           // distinct (step, layer) pairs
  std::array<std::size_t, 3> missing{};  // per role: pairs without it
  bool none_of(Role r) const { return layer_steps > 0 && missing[static_cast<std::size_t>(r)] == layer_steps; }
};
MissingRoles missing_roles(const CaptureSet& set);

// Throws input error fp8a.io.110 when a file of the set changed since it was read
// (MappedFile::check_unchanged): what was computed from it may not be the file's.
void check_captures_unchanged(const CaptureSet& set);

}  // namespace fp8a
