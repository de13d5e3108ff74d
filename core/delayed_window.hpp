// DelayedScaling's amax window, the one rule the replay (engine/delayed_replay.cpp), the forecast
// (policies/amax_trend.cpp) and report.html's saturation threshold (reports/report_html.cpp) read:
// the scale TE casts step t with comes from the amaxes of steps [t - W, t - 1], none before step
// 0, where W is amax_history_len under algo=max and 1 under most_recent (METRICS.md "scale
// (delayed)"; TE pytorch/quantization.py _default_get_amax_and_update_history).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/recipe.hpp"

namespace fp8a {

// W: the number of earlier steps a scale reads; an amax of step s stays in the windows of steps
// s + 1 .. s + W.
inline std::int64_t delayed_window_length(const Recipe& recipe) {
  return recipe.algo == DelayedAlgo::kMax ? recipe.history : 1;
}

// The steps first..last (last = step - 1) whose amaxes give step's scale.
struct DelayedWindow {
  std::int64_t first = 0, last = -1;
};
inline DelayedWindow delayed_window(const Recipe& recipe, std::int64_t step) {
  return {std::max<std::int64_t>(0, step - delayed_window_length(recipe)), step - 1};
}

// The maximum TE's amax history takes over a window (torch.max over amax_history): NaN when any
// amax in it is NaN (the maximum propagates it), and the step holding it, the latest of equal
// ones. [first, last) iterates (step, amax) pairs in step order; an empty range gives amax 0 at
// step -1. The one home of the window's maximum: the replay (engine/delayed_replay.cpp) takes it,
// and the forecast and report.html read the replay.
struct WindowAmax {
  float amax = 0.0f;
  std::int64_t step = -1;
};
template <class It>
WindowAmax window_amax(It first, It last) {
  WindowAmax w;
  for (It it = first; it != last; ++it) {
    if (std::isnan(w.amax)) break;
    if (std::isnan(it->second) || !(it->second < w.amax)) w = {it->second, it->first};
  }
  return w;
}

// window_amax of a range from those of its two halves, left then right: the left's NaN first,
// then the right's, then the larger amax, the right's on a tie (the later step). A half whose
// scan took no value (step -1) gives way. Also right for two overlapping halves, which the
// replay's table of window maxima uses (engine/delayed_replay.hpp DelayedReplay).
inline WindowAmax join_window_amax(const WindowAmax& left, const WindowAmax& right) {
  if (std::isnan(left.amax)) return left;
  if (std::isnan(right.amax)) return right;
  if (right.step < 0) return left;
  if (left.step < 0) return right;
  return right.amax < left.amax ? left : right;
}

}  // namespace fp8a
