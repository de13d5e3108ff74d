#include "policies/nonfinite.hpp"

namespace fp8a {

NonFiniteVerdict judge_nonfinite(std::span<const EvaluationRow> rows, NonFiniteAction action) {
  NonFiniteVerdict verdict;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    if (i > 0 && rows[i - 1].key == r.key) continue;
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
