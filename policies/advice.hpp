// The selection, numerics first: every (layer, GEMM) judged under every evaluated FP8 candidate
// (recipe, format), the global candidate chosen, and the plan of which GEMMs stay FP8 under it.
// A pure function from the evaluation tables to a Recommendation; reports render it, they build
// no reasons of their own.
//
// The choice (no cost model, `--cost none`): the candidate under which the most GEMM FLOPs stay
// FP8 once every failing GEMM is sent to BF16 (FLOPs: 2 m n k of the whole layer, from
// GemmLayer::dims, summed over the captured steps). Ties: the lower total risk (the sum of the
// worst Verdict::risk of the GEMMs the plan keeps in FP8; within 10 % counts as a tie), then
// kCandidatePreference:
//   current > block > mxfp8 > delayed   (recipe kind), then hybrid > e4m3 (mxfp8: e4m3 > hybrid),
//   then input order.
// Why that order: per-tensor current scaling follows each tensor's amax with no history to lag and
// runs on every FP8 GPU (sm_89+); block scaling next (sm_90+, a scale per 1x128 / 128x128 block
// to cast and read); MXFP8 needs sm_100+; delayed scaling last, because its amax history lags
// spikes and growth (datasets/real/lm-spike: the spike step saturates). Hybrid first: E5M2
// gradients keep the range TE's and Megatron's default training format is chosen for, and tracked
// BF16 better under block scaling (TransformerEngine #2754); but not for MXFP8, whose 32-element
// blocks already give gradients range: E5M2 gradients diverged there (Megatron-Bridge PR #638,
// whose MXFP8 preset and TE's MXFP8BlockScaling default are E4M3).
//
// With a CostModel: the candidates the GPU cannot run (recipe_support) or the model does not hold
// are excluded with their reason; among the others, the fastest plan (estimate_cost of the plan
// that keeps the passing GEMMs in FP8 under the candidate), ties in the numerics order above.
//
// Under a policy with FallbackScope::kGlobal (te-autoswitch) any failing GEMM sends every GEMM of
// the candidate to BF16.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/evaluation_index.hpp"
#include "engine/gemm_error.hpp"
#include "engine/gemm_pairing.hpp"
#include "policies/amax_trend.hpp"
#include "policies/cost_model.hpp"
#include "policies/policy.hpp"
#include "policies/verdict.hpp"

namespace fp8a {

// One FP8 candidate for the whole run (TE applies one recipe per autocast region).
struct RunCandidate {
  Recipe recipe;
  TrainingFormat format = TrainingFormat::kHybrid;
  bool operator==(const RunCandidate&) const = default;
};
// "current/hybrid", as the verdicts' reasons name a recipe in a format.
std::string candidate_name(const RunCandidate& c);

// The format preferred on ties: hybrid, but e4m3 for MXFP8 (see the file comment).
TrainingFormat preferred_format(RecipeKind kind);

// The tie-break order of the recipe kinds, first preferred (see the file comment).
inline constexpr RecipeKind kCandidatePreference[] = {RecipeKind::kPerTensorCurrent, RecipeKind::kBlock,
                                                      RecipeKind::kMx, RecipeKind::kPerTensorDelayed};

// Every non-BF16 recipe of the index in every format of it, in the index's order (recipe, then
// format). BF16 is never a candidate: it is the fallback.
std::vector<RunCandidate> index_candidates(const EvaluationIndex& index);

struct AdviceInputs {
  const EvaluationIndex* index = nullptr;  // the evaluation rows; never null
  std::span<const GemmRow> gemms;          // evaluate_gemm_errors (emulated rows are used)
  std::span<const GemmLayer> layers;       // pair_gemm_operands: the complete (step, layer)s
  std::vector<RunCandidate> candidates;       // the evaluated candidates; bf16 ones are ignored
  // Delayed candidates only: forecast_delayed_scaling of each format (matched by layer, role,
  // recipe spec and the role's FP8 type in the candidate's format). Empty: no forecast judged.
  std::span<const DelayedForecast> forecasts;
};

enum class Precision : std::uint8_t { kFp8, kBf16, kMixed };  // kMixed: layers only
const char* precision_name(Precision p);  // "fp8", "bf16", "mixed"

// A margin below this keeps a GEMM FP8 with a "kept FP8: ..." reason (how close it came).
inline constexpr double kSmallMargin = 0.25;

// One step's verdict of a GEMM.
struct StepVerdict {
  std::int64_t step = 0;
  Verdict verdict;
};

// One GEMM of one layer under one candidate, over every captured step.
struct GemmJudgement {
  Gemm gemm = Gemm::kFprop;
  bool judged = false;  // false: no operand copy of it was evaluated (nothing to judge)
  // The worst step's verdict: a failing one before any passing one, then the lowest margin,
  // then the highest risk, then the earliest step.
  Verdict worst;
  std::int64_t worst_step = 0;
  int steps = 0;          // steps judged
  int failed_steps = 0;   // of them, failed
  std::vector<StepVerdict> failures;  // every failed step's verdict, in step order
  bool has_output = false;  // the worst step's emulated GemmRow was found (amplification, damage)
  // Delayed candidates with forecasts: the worse of its two operands' judge_delayed_forecast
  // (the history running out of headroom after the last capture); unset when none was found.
  std::optional<Verdict> forecast;
  double flops = 0;       // 2 m n k summed over the complete captured steps
  // judged, no step failed and the forecast (if any) passed.
  bool fp8_safe = false;
  // max(worst.risk, forecast's risk): what total_risk sums.
  double risk = 0;
};

// One layer under one candidate.
struct LayerJudgement {
  std::string layer;
  // Not all three operands captured at some captured step: judged from the copies that exist,
  // the GEMMs without a complete step counting no FLOPs.
  bool incomplete = false;
  std::vector<std::int64_t> steps;       // the captured steps of the layer
  std::array<GemmJudgement, 3> gemms{};  // indexed by Gemm
  bool fp8_safe = false;                 // every judged GEMM safe (and at least one judged)
};

// Everything about one candidate: its judgements and the plan that keeps its passing GEMMs FP8.
struct CandidateAdvice {
  RunCandidate candidate;
  std::vector<LayerJudgement> layers;  // in EvaluationIndex::layers() order
  double total_flops = 0;              // every GEMM's (the same for all candidates)
  double fp8_flops = 0;                // of the GEMMs the plan keeps FP8
  double fp8_flop_share = 0;           // fp8_flops / total_flops (0 without FLOPs)
  double total_risk = 0;               // sum of the worst risk of the GEMMs kept FP8
  int gemms_to_bf16 = 0;               // judged (layer, GEMM)s the numbers send to BF16
  int gemms_not_paying = 0;            // and those the cost model sends (FP8 would not pay)
  // The reason of its failing GEMM with the lowest margin (the worst step's verdict, else the
  // failed forecast), "layers.3.mlp.linear_fc2 fprop: step 2 activation saturated ..."; empty
  // when every judged GEMM passes.
  std::string worst_failure;
  // Per captured step with failing GEMMs, in step order: how many fail there, and the reason of
  // the one with the lowest margin ("layers.3.mlp.linear_fc2 fprop: step 2 activation ...").
  struct StepFailures {
    std::int64_t step = 0;
    int gemms = 0;
    std::string worst;
  };
  std::vector<StepFailures> failures_by_step;
  // With a cost model: whether it may be chosen, why not, and its predicted GEMM speedup.
  bool runnable = true;
  std::string excluded;                // empty when runnable
  std::optional<double> speedup;       // of the plan (after the GEMMs where FP8 would not pay)
  // Of the numerics-only plan (every passing GEMM FP8), before the cost sends GEMMs to BF16.
  std::optional<double> numerics_speedup;
  double numerics_fp8_flops = 0;
  // Per (layer i, GEMM g): why the cost model sent a GEMM the numbers allow in FP8 to BF16
  // (FP8 would not pay: its casts cost more than the faster GEMM saves); "" otherwise.
  std::vector<std::array<std::string, 3>> not_paying;
  // The plan's precision of (layer i, GEMM g): kFp8 exactly when fp8_safe and the scope allows.
  std::vector<std::array<Precision, 3>> plan;
};

// The recommendation's decision for one GEMM of one layer.
struct GemmDecision {
  Gemm gemm = Gemm::kFprop;
  bool judged = false;
  bool fp8_safe = false;
  Precision precision = Precision::kBf16;
  // bf16: the worst verdict's reason, else the failed forecast's (or why nothing was judged, or
  // the global scope's cause);
  // fp8 with a margin under kSmallMargin: "kept FP8: ... margin ..."; otherwise empty.
  std::string reason;
};

struct LayerDecision {
  std::string layer;
  bool incomplete = false;
  bool fp8_safe = false;
  Precision precision = Precision::kBf16;  // fp8 / bf16 when all judged GEMMs agree, else mixed
  std::array<GemmDecision, 3> gemms{};
};

// One point of the Pareto list, from all-FP8 to all-BF16 under the chosen candidate: the plan
// after `gemms_to_bf16` of its judged GEMMs went to BF16, one more per point. The order: the GEMMs
// the chosen plan sends to BF16 (failing ones by falling risk, then those where FP8 would not pay),
// so the chosen plan is a point; then the plan's FP8 GEMMs by falling risk. Points another point
// beats on both axes (speedup, or the FP8 FLOP share without a cost model, against risk) are
// dropped; the chosen point never is.
struct ParetoPoint {
  int gemms_to_bf16 = 0;
  std::string moved;               // "layers.3.mlp.linear_fc2 wgrad" this point sent; "" at all-FP8
  double fp8_flop_share = 0;
  std::optional<double> speedup;   // with a cost model
  double risk = 0;                 // the sum of the FP8 GEMMs' risks (GemmJudgement::risk)
  int failing_in_fp8 = 0;          // FP8 GEMMs that are not fp8_safe
  bool chosen = false;             // the recommended plan
};

// Megatron-Core's --te-precision-config-file runs each module under its own recipe: tensorwise
// (Float8CurrentScaling with TE's defaults), blockwise (Float8BlockScaling: power-of-two scales,
// TE's default blocks) or mxfp8 (MXFP8BlockScaling, TE's scale rule), in e4m3 or hybrid
// (../shared/reference/consumers.md §3.1). No delayed scaling, no recipe option, no single GEMM.
bool per_module_recipe(const Recipe& recipe);

// One module of the per-module plan.
struct ModuleChoice {
  std::string layer;
  // Into Recommendation::candidates: the module's recipe; unset: the whole module in BF16.
  std::optional<std::size_t> candidate;
  // Empty on the base with every GEMM passing; else why not the base, with numbers.
  std::string reason;
};

// The per-module plan, for users who can mix recipes per module: every module on the base
// candidate where all its GEMMs pass there, else on the candidate under which they all pass
// (the lowest risk of the layer, within 10 % the preference order), else BF16; with a cost model,
// the fastest of those (BF16 included: where FP8 would not pay), the base on ties. Only
// per_module_recipe candidates the GPU runs; none under a global-scope policy.
struct ModulePlan {
  std::size_t base = 0;              // into Recommendation::candidates: the "*" recipe
  std::vector<ModuleChoice> modules; // every layer, in Recommendation::layers order
  double fp8_flops = 0;
  double fp8_flop_share = 0;
  std::optional<double> speedup;     // with a cost model
  int switched = 0;                  // modules on a candidate other than the base
  int bf16 = 0;                      // modules in BF16
  std::string why;                   // the plan in one line, with numbers
};

// A fact from the field that the captured numbers cannot show, with its source: advice beside the
// choice (policies/advice.cpp kFieldFacts says when each applies). It never changes the choice,
// except where the preference order cites it (mxfp8: e4m3 before hybrid).
struct Advisory {
  std::string source;  // "NVIDIA-NeMo/Megatron-Bridge PR #638"
  std::string text;    // the fact and what it means for this plan, with numbers
};

// A tensor copy the chosen plan keeps in FP8 (a GEMM kept FP8 consumes it), at its smallest
// margin over the captured steps: what to watch in the next run.
struct WatchItem {
  std::string layer;
  Role role = Role::kActivation;
  Orientation orientation = Orientation::kRowwise;
  std::int64_t step = 0;  // the step of the smallest margin (the earliest of equal ones)
  Criterion criterion = Criterion::kUnderflow;  // judge_tensor's limiting check there
  double measured = 0, threshold = 0, margin = 0;
};
// How many WatchItems a Recommendation lists at most.
inline constexpr std::size_t kWatchCount = 5;

struct Recommendation {
  std::vector<CandidateAdvice> candidates;  // AdviceInputs::candidates without the bf16 ones
  // Index into candidates of the chosen one; unset when none (no candidate, or none runnable).
  std::optional<std::size_t> chosen;
  // How it was chosen, with numbers; when none is chosen, why not (the exclusions).
  std::string why;
  // Every layer of the index: under the chosen candidate, or, when none is chosen, every GEMM
  // BF16 with `why` as its reason.
  std::vector<LayerDecision> layers;
  std::vector<ParetoPoint> pareto;    // under the chosen candidate; empty when none is chosen
  // Unset when no candidate can be mixed per module (module_plan_note says why).
  std::optional<ModulePlan> module_plan;
  std::string module_plan_note;
  std::vector<Advisory> advisories;
  // What the advice could not judge and why, e.g. no amax trend from a single captured step;
  // empty when nothing.
  std::vector<std::string> limits;
  const GpuTarget* gpu = nullptr;     // the cost model's GPU; null without a cost model
  const char* cost_source = "none";   // "roofline" with a cost model (estimate_cost), else "none"
  // The chosen plan's FP8 tensor copies with the smallest judge_tensor margins, smallest first
  // (ties: layer, role, orientation), at most kWatchCount; empty when none is chosen.
  std::vector<WatchItem> watch;
};

// The selection. `cost` null: numerics alone (--cost none); else its recipes name the candidates'
// recipes (matched by ==) and its layers the GemmLayers' names.
Recommendation recommend(const AdviceInputs& inputs, const Policy& policy, const CostModel* cost);

}  // namespace fp8a
