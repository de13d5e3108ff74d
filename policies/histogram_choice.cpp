#include "policies/histogram_choice.hpp"

#include <map>
#include <string>
#include <utility>

namespace fp8a {

std::vector<HistogramChoice> histogram_choices(std::span<const EvaluationRow> rows) {
  std::vector<HistogramChoice> out;
  std::map<std::pair<std::string, Role>, std::size_t> slot;
  for (const EvaluationRow& r : rows) {
    auto [it, fresh] = slot.try_emplace({r.key.layer, r.key.role}, out.size());
    if (fresh) out.push_back({r.key, std::nullopt, 0});
    HistogramChoice& c = out[it->second];
    if (!c.worst && r.key.step > c.key.step) c.key = r.key;  // the latest step while none is outside
    if (!is_fp8(r.recipe.kind) || r.orientation != Orientation::kRowwise || !r.applicability.ok)
      continue;
    const double outside = r.metrics.underflow_pct + r.metrics.saturated_pct;
    if (outside > c.outside_pct) c = {r.key, RunCandidate{r.recipe, r.format}, outside};
  }
  return out;
}

}  // namespace fp8a
