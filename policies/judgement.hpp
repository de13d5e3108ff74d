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
  bool judged = false;  // false: no operand copy of it was evaluated (nothing to judge)
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

// The verdict that sends a GEMM that is not fp8_safe to BF16: the worst step's when it failed,
// else the failed forecast's. Only for judged GEMMs that are not fp8_safe.
const Verdict& failing_verdict(const GemmJudgement& j);

// The sum of the judged GEMMs' risks of the layer.
double layer_risk(const LayerJudgement& l);
// The sum of the layer's GEMM FLOPs.
double layer_flops(const LayerJudgement& l);

}  // namespace fp8a
