// The cost plan: a candidate's numbers' plan (fallback_plan.hpp) priced on the cost model's GPU.
// A candidate the GPU cannot run or the model does not hold is excluded with its reason;
// otherwise each GEMM the numbers allow in FP8 goes to BF16 where FP8 would not pay (the captured
// GEMMs are no slower without it), and the plan's predicted speedup is set.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "policies/cost_model.hpp"
#include "policies/fallback_plan.hpp"
#include "policies/judging.hpp"

namespace fp8a {

// The cost model's index of the recipe; -1 when it does not hold it.
int cost_recipe_index(const CostModel& cost, const Recipe& recipe);

// The cost model's row of each layer (RecommendationEvidence::layers order), when it has one.
using CostRows = std::vector<std::optional<std::size_t>>;
// Empty entries for every layer without a cost model.
CostRows cost_rows(std::span<const CapturedLayer> layers, const CostModel* cost);

// `ca` with runnable / excluded, numerics_speedup and numerics_fp8_flops (of the numbers' plan),
// the GEMMs where FP8 would not pay sent to BF16 (not_paying, gemms_not_paying, the tally
// redone) and speedup.
CandidatePlan plan_cost(CandidatePlan ca, const CostModel& cost, const CostRows& rows);

}  // namespace fp8a
