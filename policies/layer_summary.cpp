#include "policies/layer_summary.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace fp8a {

namespace {

// Replaces w when v is worse; `worse(a, b)` says a is worse than b. NaN is the worst of all.
template <class Worse>
void keep_worst(WorstValue* w, double v, const EvaluationRow& row, bool first, Worse worse) {
  if (first || v != v || (w->value == w->value && worse(v, w->value))) {
    w->value = v;
    w->tensor = role_name(row.key.role);
    if (row.orientation == Orientation::kColumnwise) w->tensor += "/col";
    w->step = row.key.step;
  }
}

}  // namespace

std::vector<LayerSummary> summarize_layers(std::span<const EvaluationRow> rows) {
  std::vector<LayerSummary> out;
  std::map<std::pair<std::string, std::string>, std::size_t> index;
  auto lower = [](double a, double b) { return a < b; };
  auto higher = [](double a, double b) { return a > b; };
  // Layers first appear in row order; keep that order by assigning slots as they appear.
  for (const auto& row : rows) {
    if (!row.applicability.ok) continue;
    const std::string spec = row.recipe.spec();
    auto [it, inserted] = index.try_emplace({row.key.layer, spec}, out.size());
    if (inserted) {
      out.emplace_back();
      out.back().layer = row.key.layer;
      out.back().recipe = spec;
    }
    LayerSummary& s = out[it->second];
    const bool first = s.evaluations == 0;
    const QuantMetrics& m = row.metrics;
    keep_worst(&s.min_sqnr_db, m.sqnr_db, row, first, lower);
    keep_worst(&s.min_cos, m.cos, row, first, lower);
    keep_worst(&s.max_rel_mse, m.rel_mse, row, first, higher);
    keep_worst(&s.max_underflow_pct, m.underflow_pct, row, first, higher);
    keep_worst(&s.max_overflow_pct, m.overflow_pct, row, first, higher);
    keep_worst(&s.max_saturated_pct, m.saturated_pct, row, first, higher);
    s.nonfinite_count += row.stats.nan_count + row.stats.inf_count;
    ++s.evaluations;
  }
  // Group each layer's recipes together, layers in order of first appearance.
  std::map<std::string, std::size_t> layer_rank;
  for (const auto& s : out) layer_rank.try_emplace(s.layer, layer_rank.size());
  std::stable_sort(out.begin(), out.end(), [&](const auto& a, const auto& b) {
    return layer_rank[a.layer] < layer_rank[b.layer];
  });
  return out;
}

}  // namespace fp8a
