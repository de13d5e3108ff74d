#include "policies/layer_summary.hpp"

#include <algorithm>
#include <utility>

#include "engine/evaluation_index.hpp"

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
  const EvaluationIndex index(rows);
  auto lower = [](double a, double b) { return a < b; };
  auto higher = [](double a, double b) { return a > b; };
  // One layer's summaries, recipes in the order of their first evaluated row.
  struct Layer {
    const EvaluationRow* first = nullptr;  // its first evaluated row
    std::vector<LayerSummary> recipes;
  };
  const auto& formats = index.formats();
  const auto format_rank = [&](TrainingFormat f) {
    return std::find(formats.begin(), formats.end(), f) - formats.begin();
  };
  std::vector<Layer> layers;
  for (const auto& name : index.layers()) {
    Layer l;
    for (const EvaluationRow* row : index.rows_of(name)) {
      if (!row->applicability.ok) continue;
      if (l.first == nullptr) l.first = row;
      const std::string spec = row->recipe.spec();
      auto it = std::find_if(l.recipes.begin(), l.recipes.end(), [&](const LayerSummary& s) {
        return s.recipe == spec && s.format == row->format;
      });
      if (it == l.recipes.end()) {
        // After the recipe's formats that come before this one (or at the end, for a new recipe).
        auto at = std::find_if(l.recipes.begin(), l.recipes.end(),
                               [&](const LayerSummary& s) { return s.recipe == spec; });
        while (at != l.recipes.end() && at->recipe == spec && format_rank(at->format) < format_rank(row->format)) ++at;
        it = l.recipes.insert(at, LayerSummary{});
        it->layer = name;
        it->recipe = spec;
        it->format = row->format;
      }
      LayerSummary& s = *it;
      const bool first = s.evaluations == 0;
      const QuantMetrics& m = row->metrics;
      keep_worst(&s.min_sqnr_db, m.sqnr_db, *row, first, lower);
      keep_worst(&s.min_cos, m.cos, *row, first, lower);
      keep_worst(&s.max_rel_mse, m.rel_mse, *row, first, higher);
      keep_worst(&s.max_underflow_pct, m.underflow_pct, *row, first, higher);
      keep_worst(&s.max_overflow_pct, m.overflow_pct, *row, first, higher);
      keep_worst(&s.max_saturated_pct, m.saturated_pct, *row, first, higher);
      s.nonfinite_count += row->stats.nan_count + row->stats.inf_count;
      ++s.evaluations;
    }
    if (l.first != nullptr) layers.push_back(std::move(l));
  }
  // Layers in the order of their first evaluated row (a layer whose first rows were not
  // evaluated comes after the layers that were at that point).
  std::stable_sort(layers.begin(), layers.end(),
                   [](const Layer& a, const Layer& b) { return a.first < b.first; });
  std::vector<LayerSummary> out;
  for (auto& l : layers)
    for (auto& s : l.recipes) out.push_back(std::move(s));
  return out;
}

}  // namespace fp8a
