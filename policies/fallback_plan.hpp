// The BF16-fallback decision: under one candidate, which GEMMs stay FP8 and which go to BF16, and
// why. The numbers' plan keeps every fp8_safe GEMM in FP8 and sends the others to BF16; under a
// policy with FallbackScope::kGlobal (te-autoswitch) one failing GEMM sends every GEMM of the
// candidate to BF16. cost_plan.hpp then sends the GEMMs where FP8 would not pay; decide_layers
// gives each GEMM of the chosen plan its precision and reason.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policies/candidate.hpp"
#include "policies/judgement.hpp"
#include "policies/judging.hpp"
#include "policies/policy.hpp"

namespace fp8a {

enum class Precision : std::uint8_t { kFp8, kBf16, kMixed };  // kMixed: layers only
const char* precision_name(Precision p);  // "fp8", "bf16", "mixed"

// A margin below this keeps a GEMM FP8 with a "kept FP8: ..." reason (how close it came).
inline constexpr double kSmallMargin = 0.25;

// Everything about one candidate: its judgements and the plan that keeps its passing GEMMs FP8.
struct CandidatePlan {
  RunCandidate candidate;
  std::vector<LayerJudgement> layers;  // in EvaluationIndex::layers() order
  double total_flops = 0;              // every GEMM's (the same for all candidates)
  double fp8_flops = 0;                // of the GEMMs the plan keeps FP8
  double fp8_flop_share = 0;           // fp8_flops / total_flops (0 without FLOPs)
  double total_risk = 0;               // sum of the worst risk of the GEMMs kept FP8
  int fp8_gemms = 0;                   // judged (layer, GEMM)s the plan keeps FP8
  int gemms_to_bf16 = 0;               // judged (layer, GEMM)s the numbers send to BF16 (not the forced ones)
  int gemms_not_paying = 0;            // and those the cost model sends (FP8 would not pay)
  // Of gemms_to_bf16, those that failed no criterion but could not be evaluated (not_evaluated).
  int gemms_not_evaluated = 0;
  // The reason of its failing GEMM with the lowest margin (the worst step's verdict, else the
  // failed forecast), "layers.3.mlp.linear_fc2 fprop: step 2 activation saturated ..."; empty
  // when every judged GEMM passes.
  std::string worst_failure;
  // Per captured step with failing GEMMs, in step order: how many fail there, and the reason of
  // the one with the lowest margin ("layers.3.mlp.linear_fc2 fprop: step 2 activation ...").
  struct StepFailures {
    std::int64_t step = 0;
    int gemms = 0;
    int not_evaluated = 0;  // of them, those whose verdict there is not_evaluated
    std::string worst;
  };
  std::vector<StepFailures> failures_by_step;
  // Whether it may be chosen and why not: TE cannot train it (evaluation_only, core
  // te_cannot_train), or, with a cost model, the GPU cannot run it or the model does not hold it.
  bool runnable = true;
  bool evaluation_only = false;
  // The target TE release (--te-version) cannot train it; a later one can (te_release_cannot_train).
  bool release_excluded = false;
  std::string release_reason;          // te_release_cannot_train's, for the target GPU
  std::string excluded;                // empty when runnable
  std::optional<double> speedup;       // of the plan (after the GEMMs where FP8 would not pay)
  // Of the numerics-only plan (every passing GEMM FP8), before the cost sends GEMMs to BF16.
  std::optional<double> numerics_speedup;
  double numerics_fp8_flops = 0;
  // Per (layer i, GEMM g): why the cost model sent a GEMM the numbers allow in FP8 to BF16
  // (FP8 would not pay: its casts cost more than the faster GEMM saves); "" otherwise.
  std::vector<std::array<std::string, 3>> not_paying;
  // Per (layer i, GEMM g): why a GEMM that passes is BF16 because another expert of its grouped
  // module needs that GEMM in BF16 (plan_grouped_modules); "" otherwise.
  std::vector<std::array<std::string, 3>> grouped;
  // The plan's precision of (layer i, GEMM g): kFp8 exactly when fp8_safe and the scope allows,
  // and every expert of its grouped module may keep that GEMM in FP8.
  std::vector<std::array<Precision, 3>> plan;
};

// The experts of a grouped module (core/layer_name.hpp grouped_module_of: TE's GroupedLinear,
// captured per expert) get one precision per GEMM: where the plan keeps a judged GEMM of one
// expert in BF16 (its numbers fail, or FP8 would not pay), every expert's is BF16, with `grouped`
// naming the expert and its reason; TE runs the module's experts in one recipe and no config can
// tell them apart. Counts those GEMMs in gemms_to_bf16; the caller tallies the plan after it.
void plan_grouped_modules(CandidatePlan* ca);

// The numbers' plan of the candidate over its judged layers: plan, gemms_to_bf16, the FP8 tally,
// worst_failure and failures_by_step; no cost fields.
CandidatePlan plan_fallback(const RunCandidate& candidate, std::vector<LayerJudgement> layers,
                            FallbackScope scope);

// The FLOPs a precision plan of the candidate's layers (in CandidatePlan::layers order; a shorter
// one covers the first layers) keeps in FP8: its kFp8 GEMMs' GemmJudgement::flops.
double plan_fp8_flops(const CandidatePlan& ca, std::span<const std::array<Precision, 3>> plan);

// Sets fp8_flops, total_risk and fp8_gemms (of the GEMMs whose plan is kFp8) and fp8_flop_share
// from the plan.
void tally_fp8(CandidatePlan* ca);

// A sum of GEMM risks in words, as the answer prints it: "mean threshold load 0.52 over 6 FP8
// GEMMs". A GEMM's risk is its threshold load: the measured value of its closest check as a
// fraction of the value that fails it (x the criterion's weight; 1.00 = at a threshold, below 1
// passes); docs/POLICY.md "Threshold load". "no FP8 GEMM" for none; `what` names the GEMMs.
std::string threshold_load_text(double risk_sum, int gemms, const char* what = "FP8 GEMM");

// How the reason of a GEMM that was not judged begins.
inline constexpr std::string_view kNotJudged = "not judged: ";

// The recommendation's decision for one GEMM of one layer.
struct GemmDecision {
  Gemm gemm = Gemm::kFprop;
  bool judged = false;
  bool fp8_safe = false;
  // What the plan trains it in. A GEMM that was not judged trains as the files leave it: under the
  // chosen recipe when the plan keeps some GEMM in FP8, else BF16 (its reason says which, and why
  // it was not judged).
  Precision precision = Precision::kBf16;
  // not judged: "not judged: <GemmJudgement::unjudged>; the files train it under ..."; bf16: the worst verdict's reason, else the failed forecast's (or why nothing was judged, or
  // the global scope's cause);
  // fp8 over a watch-only criterion's threshold: "watch: ..." (the breach); fp8 with a margin
  // under kSmallMargin: "kept FP8: ... margin ..."; otherwise empty.
  std::string reason;
  // BF16 whatever its numbers (GemmJudgement::forced_bf16, its reason): TE refuses its shapes, or
  // the module does not run through TE.
  bool forced = false;
  // fp8 and a criterion that only watches (CriterionAction::kWatch) is over its threshold at the
  // worst step or in the forecast.
  bool watched = false;
};

struct LayerDecision {
  std::string layer;
  bool incomplete = false;
  bool fp8_safe = false;
  Precision precision = Precision::kBf16;  // fp8 / bf16 when all its GEMMs train so, else mixed
  std::array<GemmDecision, 3> gemms{};
};

// Every layer's decisions under the chosen candidate's plan (its cost plan applied, if any).
std::vector<LayerDecision> decide_layers(const CandidatePlan& chosen, FallbackScope scope);

// Every GEMM of every layer BF16 with `why` as its reason: the decisions when nothing is chosen.
std::vector<LayerDecision> all_bf16_layers(std::span<const CapturedLayer> layers, const std::string& why);

}  // namespace fp8a
