// Where finished units of work are kept so that a run killed part-way does not redo them (a
// checkpoint in --out: rundir/checkpoint.hpp). The engine asks the store before each unit and
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
  // One shard: its statistics and its result under every candidate evaluated so far, each by the
  // candidate's own key (candidate_unit_key), so a later run with other recipes evaluates only
  // the candidates it lacks. Counted per candidate.
  kShard,
  kGemmLayer,  // one GEMM layer's rows at one step (evaluate_gemm_errors' job)
};

class UnitStore {
 public:
  virtual ~UnitStore() = default;
  // The bytes saved under the key, if any (and intact).
  virtual std::optional<std::string> load(UnitKind kind, std::string_view key) = 0;
  // Replaces what was saved under the key.
  virtual void save(UnitKind kind, std::string_view key, std::string_view bytes) = 0;
  // Told how many evaluations (shard x candidate, or GEMM layers) came from the store and how
  // many were computed, as the engine goes: for the run's account of what it reused.
  virtual void count(UnitKind kind, std::uint64_t reused, std::uint64_t computed) {
    (void)kind, (void)reused, (void)computed;
  }
};

// The key of a shard: its file (path and identity), its name, type and shape.
std::string shard_unit_key(const CapturedTensor& shard);
// The key of a candidate inside a shard's unit (every field, the scale as bits).
std::string candidate_unit_key(const Candidate& candidate);

// The backend's evaluation of a shard: the candidates the store has are taken from it, the
// backend evaluates the others (none: not called, unless the store lacks the shard's statistics)
// and the shard's unit is saved with them added. store may be null.
TensorEvaluation evaluate_shard(const Backend& backend, UnitStore* store, const CapturedTensor& shard,
                                std::span<const Candidate> candidates);

}  // namespace fp8a
