// Where finished units of work are kept so that a run killed part-way does not redo them (a
// checkpoint in --out: reports/checkpoint.hpp). The engine asks the store before each unit and
// gives it each unit it computed; a key names everything the unit's result depends on (the input
// file's identity, the tensor, the candidates with their scales, the options), so a changed input
// or option simply misses. Implementations are called from worker threads and synchronise
// themselves.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "datasets/capture.hpp"
#include "engine/backend.hpp"

namespace fp8a {

enum class UnitKind : std::uint8_t {
  kShard,      // one shard's backend evaluation (TensorEvaluation; no candidates: statistics)
  kGemmLayer,  // one GEMM layer's rows at one step (evaluate_gemm_errors' job)
};

class UnitStore {
 public:
  virtual ~UnitStore() = default;
  // The bytes saved under the key, if any (and intact).
  virtual std::optional<std::string> load(UnitKind kind, std::string_view key) = 0;
  virtual void save(UnitKind kind, std::string_view key, std::string_view bytes) = 0;
};

// The key of a shard's evaluation with these candidates (encoded exactly, scales as bits).
std::string shard_unit_key(const CapturedTensor& shard, std::span<const Candidate> candidates);

// The backend's evaluation of a shard, from the store when it has it (and then the backend is
// not called), else computed and saved. store may be null.
TensorEvaluation evaluate_shard(const Backend& backend, UnitStore* store, const CapturedTensor& shard,
                                std::span<const Candidate> candidates);

}  // namespace fp8a
