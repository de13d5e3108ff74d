#include "policies/nonfinite.hpp"

#include <set>
#include <tuple>

namespace fp8a {

NonFiniteVerdict judge_nonfinite(std::span<const EvaluationRow> rows, NonFiniteAction action) {
  NonFiniteVerdict verdict;
  // Every tensor once: its rows repeat per recipe and copy, and again per format.
  std::set<std::tuple<std::int64_t, std::string, Role>> seen;
  for (const auto& r : rows) {
    if (!seen.emplace(r.key.step, r.key.layer, r.key.role).second) continue;
    if (r.stats.nan_count + r.stats.inf_count == 0) continue;
    const std::string what = r.file + ": tensor '" + r.tensor_name + "' holds " +
                             std::to_string(r.stats.nan_count) + " NaN and " +
                             std::to_string(r.stats.inf_count) + " Inf elements";
    if (action == NonFiniteAction::kFail) {
      verdict.failure = what + " (--fail-on-nonfinite)";
      return verdict;
    }
    verdict.warnings.push_back(what + "; they are counted and left out of the error sums");
  }
  return verdict;
}

}  // namespace fp8a
