// The answer `run` prints first: the recommended TE recipe and format, the GEMMs to keep in BF16
// with their reasons, the predicted speedup and FP8 share, the candidates the GPU excludes and the
// GEMMs to watch next run. Layout only: every reason and number comes from the Recommendation.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "policies/advice.hpp"
#include "reports/consumers/consumer_plan.hpp"

namespace fp8a {

// Why there is no recommendation (e.g. --no-gemms), and what it would have been for: the GPU
// (--gpu) and the cost source (--cost). A recommendation names its own (Recommendation::gpu,
// cost_source).
struct SkippedRecommendation {
  std::string why;
  const GpuTarget* gpu = nullptr;
  const char* cost_source = "none";
  std::string cost_basis = kNumericsOnlyBasis;
};

// What the answer and summary.json's "decision" are rendered from.
struct AnswerContext {
  const Recommendation* recommendation = nullptr;  // null: none, `skipped` says why
  SkippedRecommendation skipped;                           // without a recommendation only
  // Config files the run left out, each with the writer's sentence why.
  std::vector<std::string> not_written;
  // The GPU and the cost source the answer is for: the recommendation's, else skipped's.
  std::string gpu_name() const;
  const char* cost_source() const;
  const std::string& cost_basis() const;
  // delayed_search_summary when the run searched delayed scaling's options; empty otherwise.
  std::string delayed_search;
  // The consumer plan the run's files were written from (render_run's); unset: the answer plans
  // the recommendation itself (the same function, so the same plan).
  std::optional<ConsumerPlan> consumers;
};

// The chosen plan's GEMMs by what happens to them, each "<layer> <gemm>: <reason>" (a layer none
// of whose GEMMs was judged: "<layer>: <reason>"), in layer then GEMM order. The experts a grouped
// module's other expert sends to BF16 (CandidatePlan::grouped) are one line per module and GEMM,
// "<module>.expert{0,1,3} <gemm>: <reason>", where the first of them would be.
struct PlanFallbacks {
  std::vector<std::string> bf16;   // kept in BF16 for the numbers
  std::size_t bf16_gemms = 0;      // the GEMMs those lines hold
  // Not judged (GemmDecision::judged false): a whole layer's line when none of its GEMMs was,
  // else one per GEMM; their reasons say what the files train them in.
  std::vector<std::string> unjudged;
  std::size_t unjudged_gemms = 0, gemms = 0;  // of every GEMM of the plan
  // BF16 whatever the numbers (GemmDecision::forced): one line per layer, "<layer>: <reason>".
  std::vector<std::string> forced;
  std::size_t forced_gemms = 0;
  std::vector<std::string> close;  // kept FP8 with a reason: close to the limit
  std::vector<std::string> watched;  // kept FP8 over a watch-only criterion's threshold
  std::size_t not_paying = 0;      // GEMMs the numbers allow in FP8 that the cost sends to BF16
};
// The fallbacks of rec's chosen candidate; empty when none is chosen.
PlanFallbacks plan_fallbacks(const Recommendation& rec);

// The most GEMMs the answer lists kept FP8 over a watch-only threshold.
inline constexpr std::size_t kWatchListLength = 5;

// A watch-list item as the answer and the reports print it: "<layer> <gemm>: <criterion> margin
// <m> (<status> at step <s>)". The layer raw: each format escapes it its own way.
std::string watch_item_text(const WatchItem& w);

// (candidate, why) pairs as lines "<candidate>, <candidate>: <why>", the candidates sharing a why
// on one line (every format of a recipe the GPU cannot run), in the order each why first appears.
std::vector<std::string> join_by_reason(const std::vector<std::pair<std::string, std::string>>& excluded);

// What the written files train (ConsumerPlan::trained), a line each: one ("this plan, every
// file (...)") when every file trains the recommendation's plan, else the per-GEMM files' and the
// per-module files', each with its own FP8 share and speedup on `gpu`. Empty when none is chosen.
std::vector<std::string> trained_plan_lines(const ConsumerPlan& plan, const std::string& gpu);

// Why no recipe was chosen, as "no FP8 recipe can be recommended" goes on: ": nothing judged:
// ...", " (no FP8 candidate evaluated)" or ": none runs on <gpu>[ with TE X.Y (--te-version)]".
std::string no_recipe_reason(const Recommendation& rec, const std::string& gpu);

// The answer block, every line ending in '\n' (the "wrote ..." line is the caller's).
std::string render_answer(const AnswerContext& answer);

}  // namespace fp8a
