// The Backend interface: evaluates a batch of candidates on one tensor.
//
// A candidate is a recipe plus the FP8 type it casts to. evaluate() reads the tensor as few times
// as the recipes allow (one statistics pass, one pass that evaluates every candidate), so a device
// backend uploads each tensor once. Backends report raw sums and derive the reported numbers with
// finalize_metrics, so every backend gives the same metrics.
#pragma once

#include <limits>
#include <span>
#include <string>
#include <vector>

#include "core/metrics.hpp"
#include "core/recipe.hpp"
#include "core/tensor_view.hpp"

namespace fp8a {

struct Candidate {
  Recipe recipe;
  Fp8Format format = Fp8Format::kE4M3;
  Role role = Role::kActivation;                  // selects the block shape (weights: 128x128)
  Orientation orientation = Orientation::kRowwise;
  // Delayed scaling: the scale TE would use at this step, replayed from the amax history by the
  // engine (delayed_replay.hpp); NaN when no history is available: the candidate is then not
  // applicable. Current scaling: NaN (scale from this tensor's amax) or the scale of an amax
  // reduced over several ranks.
  float given_scale = std::numeric_limits<float>::quiet_NaN();
  // NVFP4: the amax the copy's level-2 scale comes from when the ranks share one (reduced over
  // them); NaN: the tensor's own.
  float given_amax = std::numeric_limits<float>::quiet_NaN();
};

// Whether a candidate can be evaluated on a tensor (engine/run.hpp recipe_fits, a delayed
// candidate's replayed history), with the reason if not. Every backend evaluates every recipe.
struct Applicability {
  bool ok = true;
  std::string reason;  // empty when ok
  static Applicability yes() { return {}; }
  static Applicability no(std::string why) { return {false, std::move(why)}; }
};

struct CandidateResult {
  Applicability applicability;
  QuantMetrics metrics;  // meaningful only when applicability.ok
};

struct TensorEvaluation {
  TensorStats stats;
  std::vector<CandidateResult> results;  // one per candidate, same order
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;    // "cpu", "cuda"
  virtual std::string device() const = 0;  // human description, e.g. "2 threads (oneTBB)"
  // Deterministic: the same inputs give bit-identical results whatever the thread count. With no
  // candidates only the statistics pass runs (the engine's amax pass over the ranks of a sharded
  // tensor goes through the backend this way, so a device backend reads the tensor there).
  virtual TensorEvaluation evaluate(std::span<const Candidate> candidates,
                                    const TensorView& tensor) const = 0;
};

}  // namespace fp8a
