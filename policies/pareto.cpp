#include "policies/pareto.hpp"

#include <algorithm>

namespace fp8a {

std::vector<ParetoPoint> pareto_path(const CandidatePlan& c, const CostModel* cost, const CostRows& cost_row) {
  struct Item {
    std::size_t li;
    int g;
    double risk;
    int group;  // 0: failing, sent to BF16; 1: safe, sent to BF16 (cost, scope); 2: kept FP8
  };
  std::vector<Item> items;
  for (std::size_t li = 0; li < c.layers.size(); ++li)
    for (const GemmJudgement& j : c.layers[li].gemms) {
      if (!j.judged) continue;
      const int g = static_cast<int>(j.gemm);
      const int group = c.plan[li][static_cast<std::size_t>(g)] == Precision::kFp8 ? 2
                        : j.fp8_safe                                           ? 1
                                                                               : 0;
      items.push_back({li, g, j.risk, group});
    }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.group != b.group) return a.group < b.group;
    return a.group != 1 && a.risk > b.risk;  // group 1 stays in layer order
  });
  const int r = cost != nullptr ? cost_recipe_index(*cost, c.candidate.recipe) : -1;
  const bool costed = r >= 0 && c.speedup.has_value();
  CostPlan plan = costed ? uniform_plan(*cost, kCostBf16) : CostPlan{};
  double fp8_flops = 0, risk = 0;
  int failing = 0, chosen_at = 0;
  std::vector<std::array<bool, 3>> fp8(c.layers.size(), {false, false, false});
  for (const Item& it : items) {
    const GemmJudgement& j = c.layers[it.li].gemms[static_cast<std::size_t>(it.g)];
    fp8[it.li][static_cast<std::size_t>(it.g)] = true;
    fp8_flops += j.flops;
    risk += j.risk;
    failing += j.fp8_safe ? 0 : 1;
    if (it.group != 2) ++chosen_at;
    if (costed && cost_row[it.li]) plan.choice[*cost_row[it.li]][static_cast<std::size_t>(it.g)] = r;
  }
  std::vector<ParetoPoint> points;
  for (std::size_t k = 0; k <= items.size(); ++k) {
    if (k > 0) {
      const Item& it = items[k - 1];
      const GemmJudgement& j = c.layers[it.li].gemms[static_cast<std::size_t>(it.g)];
      fp8[it.li][static_cast<std::size_t>(it.g)] = false;
      fp8_flops -= j.flops;
      risk -= j.risk;
      failing -= j.fp8_safe ? 0 : 1;
      if (costed && cost_row[it.li])
        plan.choice[*cost_row[it.li]][static_cast<std::size_t>(it.g)] = kCostBf16;
    }
    ParetoPoint p;
    p.gemms_to_bf16 = static_cast<int>(k);
    if (k > 0)
      p.moved = c.layers[items[k - 1].li].layer + " " +
                gemm_name(static_cast<Gemm>(items[k - 1].g));
    p.fp8_flop_share = c.total_flops > 0 ? std::max(0.0, fp8_flops) / c.total_flops : 0.0;
    if (costed) p.speedup = estimate_cost(*cost, plan).speedup;
    p.risk = k == items.size() ? 0.0 : std::max(0.0, risk);
    p.failing_in_fp8 = failing;
    p.chosen = static_cast<int>(k) == chosen_at;
    points.push_back(std::move(p));
  }
  // Drop the points another beats on both axes.
  const auto speed = [](const ParetoPoint& p) { return p.speedup ? *p.speedup : p.fp8_flop_share; };
  std::vector<ParetoPoint> kept;
  for (const ParetoPoint& p : points) {
    bool dominated = false;
    for (const ParetoPoint& q : points)
      if (&q != &p && speed(q) >= speed(p) && q.risk <= p.risk &&
          (speed(q) > speed(p) || q.risk < p.risk))
        dominated = true;
    if (!dominated || p.chosen) kept.push_back(p);
  }
  return kept;
}

}  // namespace fp8a
