// The judgements of one candidate: every (layer, GEMM) over every captured step, and the delayed
// forecast. Value types; judging.hpp makes them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/gemm_pairing.hpp"
#include "policies/verdict.hpp"

namespace fp8a {

// One step's verdict of a GEMM.
struct StepVerdict {
  std::int64_t step = 0;
  Verdict verdict;
};

// One GEMM of one layer under one candidate, over every captured step.
struct GemmJudgement {
  Gemm gemm = Gemm::kFprop;
  // Judged at some step: both of its operands were evaluated there, and they pair into a GEMM
  // (pair_gemm_operands did not skip the step's layer).
  bool judged = false;
  // When not judged, why not, in words: "no gradient (dY) captured: dgrad needs dY and W", or the
  // pairing's skip line. Empty when judged.
  std::string unjudged;
  // The worst step's verdict: a failing one before any passing one, among failing ones the
  // lowest failing_margin (the blocking failure that went furthest), then the lowest margin,
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
  // 2 m n k summed over the judged steps: the whole layer's dims where all three operands were
  // paired, else the two operands' own (single-rank captures).
  double flops = 0;
  // judged, no step failed and the forecast (if any) passed.
  bool fp8_safe = false;
  // max(worst.risk, forecast's risk): what total_risk sums.
  double risk = 0;
  // Why the GEMM cannot train in low precision under the candidate whatever its numbers (TE
  // refuses its shapes, or Megatron does not run the module through TE: forced_bf16 in
  // judging.hpp); empty otherwise. When set, the GEMM is judged, not fp8_safe, and planned BF16
  // outside the numbers' fallbacks.
  std::string forced_bf16;
};

// One layer under one candidate.
struct LayerJudgement {
  std::string layer;
  // Not all three operands captured (or paired) at some captured step: each GEMM judged at the
  // steps where both of its operands were (GemmJudgement::judged, unjudged).
  bool incomplete = false;
  std::vector<std::int64_t> steps;       // the captured steps of the layer
  std::array<GemmJudgement, 3> gemms{};  // indexed by Gemm
  bool fp8_safe = false;                 // every judged GEMM safe (and at least one judged)
};

// The verdict that sends a GEMM that is not fp8_safe to BF16: the worst step's when it failed,
// else the failed forecast's. Only for judged GEMMs that are not fp8_safe.
const Verdict& failing_verdict(const GemmJudgement& j);
// A GEMM that is not fp8_safe only because it could not be evaluated: every failed step's
// verdict not_evaluated, and no failed forecast.
bool not_evaluated(const GemmJudgement& j);

// The sum of the judged GEMMs' risks of the layer.
double layer_risk(const LayerJudgement& l);
// The sum of the layer's GEMM FLOPs.
double layer_flops(const LayerJudgement& l);

}  // namespace fp8a
