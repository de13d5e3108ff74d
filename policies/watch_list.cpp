#include "policies/watch_list.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace fp8a {

std::vector<WatchItem> watch_list(const EvaluationIndex& index, const CandidatePlan& c, const Policy& policy) {
  std::map<std::tuple<std::string, Role, Orientation>, WatchItem> copies;
  for (std::size_t li = 0; li < c.layers.size(); ++li) {
    const LayerJudgement& lj = c.layers[li];
    for (const GemmOperandUse& use : kGemmOperandUses) {
      if (c.plan[li][static_cast<int>(use.gemm)] != Precision::kFp8) continue;
      for (const auto& [role, orientation] :
           {std::pair{use.a, use.a_orientation}, std::pair{use.b, use.b_orientation}})
        for (std::int64_t step : lj.steps) {
          const EvaluationRow* row =
              index.find_for_use({step, lj.layer, role}, c.candidate.recipe, c.candidate.format, orientation);
          if (row == nullptr) continue;
          const Verdict v = judge_tensor({row}, policy);
          if (!v.limiting) continue;
          const auto key = std::tuple{lj.layer, role, orientation};
          const auto it = copies.find(key);
          if (it != copies.end() &&
              !(v.margin < it->second.margin || (v.margin == it->second.margin && step < it->second.step)))
            continue;
          copies[key] = {lj.layer, role, orientation, step, *v.limiting, v.measured, v.threshold, v.margin};
        }
    }
  }
  std::vector<WatchItem> watch;
  for (const auto& [key, w] : copies) watch.push_back(w);
  std::stable_sort(watch.begin(), watch.end(),
                   [](const WatchItem& x, const WatchItem& y) { return x.margin < y.margin; });
  if (watch.size() > kWatchCount) watch.resize(kWatchCount);
  return watch;
}

}  // namespace fp8a
