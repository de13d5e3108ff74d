#include "policies/cost_plan.hpp"

#include "core/text.hpp"

namespace fp8a {

int cost_recipe_index(const CostModel& cost, const Recipe& recipe) {
  for (std::size_t i = 0; i < cost.recipes.size(); ++i)
    if (cost.recipes[i] == recipe) return static_cast<int>(i);
  return -1;
}

CostRows cost_rows(std::span<const CapturedLayer> layers, const CostModel* cost) {
  CostRows rows(layers.size());
  if (cost != nullptr)
    for (std::size_t li = 0; li < layers.size(); ++li)
      for (std::size_t ci = 0; ci < cost->layers.size(); ++ci)
        if (cost->layers[ci].layer == layers[li].name) rows[li] = ci;
  return rows;
}

CandidatePlan plan_cost(CandidatePlan ca, const CostModel& cost, const CostRows& rows) {
  const int r = cost_recipe_index(cost, ca.candidate.recipe);
  if (r < 0) {
    ca.runnable = false;
    ca.excluded = ca.candidate.recipe.spec() + " is not in the cost model";
    return ca;
  }
  if (!cost.support[static_cast<std::size_t>(r)].runs) {
    ca.runnable = false;
    ca.excluded = cost.support[static_cast<std::size_t>(r)].reason;
    return ca;
  }
  CostPlan plan = uniform_plan(cost, kCostBf16);
  for (std::size_t li = 0; li < ca.layers.size(); ++li)
    if (rows[li])
      for (std::size_t g = 0; g < 3; ++g)
        if (ca.plan[li][g] == Precision::kFp8) plan.choice[*rows[li]][g] = r;
  ca.numerics_speedup = estimate_cost(cost, plan).speedup;
  ca.numerics_fp8_flops = ca.fp8_flops;
  // A GEMM the numbers allow in FP8 goes to BF16 where that makes the captured GEMMs no slower
  // (FP8 would not pay there). Casts are shared by a layer's GEMMs, so repeat until nothing
  // changes (at most one pass per GEMM of a layer).
  ca.not_paying.assign(ca.layers.size(), {});
  double seconds = estimate_cost(cost, plan).plan_seconds;  // of the plan as it stands
  for (int pass = 0; pass < 3; ++pass) {
    bool changed = false;
    for (std::size_t li = 0; li < ca.layers.size(); ++li) {
      if (!rows[li]) continue;
      for (std::size_t g = 0; g < 3; ++g) {
        int& choice = plan.choice[*rows[li]][g];
        if (choice != r) continue;
        choice = kCostBf16;
        const double without = estimate_cost(cost, plan).plan_seconds;
        if (without > seconds) {
          choice = r;
          continue;
        }
        ca.plan[li][g] = Precision::kBf16;
        ++ca.gemms_not_paying;
        ca.not_paying[li][g] = format_text(
            "FP8 would not pay on %s: the captured GEMMs take %.4g us with %s %s in FP8 and "
            "%.4g us with it in BF16 (roofline, casts included)",
            cost.gpu->name, seconds * 1e6, ca.layers[li].layer.c_str(),
            gemm_name(ca.layers[li].gemms[g].gemm), without * 1e6);
        seconds = without;
        changed = true;
      }
    }
    if (!changed) break;
  }
  // A grouped module's experts again share each GEMM's precision (one not paying sends them all),
  // and the cost is that plan's.
  plan_grouped_modules(&ca);
  tally_fp8(&ca);
  for (std::size_t li = 0; li < ca.layers.size(); ++li)
    if (rows[li])
      for (std::size_t g = 0; g < 3; ++g)
        if (ca.plan[li][g] == Precision::kBf16) plan.choice[*rows[li]][g] = kCostBf16;
  ca.speedup = estimate_cost(cost, plan).speedup;
  return ca;
}

}  // namespace fp8a
