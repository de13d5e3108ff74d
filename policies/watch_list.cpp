#include "policies/watch_list.hpp"

#include <algorithm>
#include <tuple>

namespace fp8a {

const char* watch_status_name(WatchStatus s) {
  switch (s) {
    case WatchStatus::kFailed: return "failed";
    case WatchStatus::kWatched: return "watched";
    case WatchStatus::kPassed: break;
  }
  return "passed";
}

std::vector<WatchItem> watch_list(const CandidatePlan& c) {
  std::vector<WatchItem> watch;
  for (std::size_t li = 0; li < c.layers.size(); ++li)
    for (const GemmJudgement& g : c.layers[li].gemms) {
      if (!g.judged || !g.worst.limiting) continue;
      if (li < c.plan.size() && c.plan[li][static_cast<int>(g.gemm)] != Precision::kFp8) continue;
      const Verdict& v = g.worst;
      watch.push_back({c.layers[li].layer, g.gemm, g.worst_step, *v.limiting, v.measured, v.threshold, v.margin,
                       !g.fp8_safe           ? WatchStatus::kFailed
                       : !v.watched.empty() ? WatchStatus::kWatched
                                            : WatchStatus::kPassed});
    }
  std::stable_sort(watch.begin(), watch.end(), [](const WatchItem& x, const WatchItem& y) {
    return std::tuple(x.status != WatchStatus::kFailed, x.margin) < std::tuple(y.status != WatchStatus::kFailed, y.margin);
  });
  if (watch.size() > kWatchCount) watch.resize(kWatchCount);
  return watch;
}

}  // namespace fp8a
