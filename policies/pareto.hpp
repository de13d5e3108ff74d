// The Pareto path: under the chosen candidate, the plans from all-FP8 to all-BF16, one GEMM more
// to BF16 per point, with their speed and risk; the points another beats on both are dropped.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "policies/cost_plan.hpp"
#include "policies/fallback_plan.hpp"

namespace fp8a {

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

// The Pareto list of the chosen candidate's plan; `cost` null: no speedups.
std::vector<ParetoPoint> pareto_path(const CandidatePlan& chosen, const CostModel* cost, const CostRows& rows);

}  // namespace fp8a
