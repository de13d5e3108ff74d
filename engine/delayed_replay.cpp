#include "engine/delayed_replay.hpp"

#include <cfloat>
#include <cmath>

#include "core/delayed_window.hpp"
#include "core/error.hpp"

namespace fp8a {

const char* replay_mode_name(ReplayMode m) {
  switch (m) {
    case ReplayMode::kExact: return "exact";
    case ReplayMode::kApproximate: return "approximate";
    case ReplayMode::kUnavailable: break;
  }
  return "unavailable";
}

namespace {

// Bounds the walk back through steps whose history gives no valid amax (all-zero tensors).
constexpr int kMaxKeepPreviousSteps = 1'000'000;

}  // namespace

ReplayedScale replay_delayed_scale(const std::map<std::int64_t, float>& known, std::int64_t step,
                                   const Recipe& recipe, Fp8Format format) {
  FP8A_CHECK(replays_history(recipe.kind), "not a delayed recipe");
  const float scaled_max = fp8_max_finite(format) * std::ldexp(1.0f, -recipe.margin);
  ReplayedScale out;
  bool exact = true;
  std::string detail;
  std::int64_t s = step;
  for (int guard = 0; guard < kMaxKeepPreviousSteps; ++guard) {
    if (s <= 0) {  // TE's initial state: scale 1
      out.mode = exact ? ReplayMode::kExact : ReplayMode::kApproximate;
      out.scale = 1.0f;
      out.detail = detail;
      return out;
    }
    const std::int64_t first = delayed_window(recipe, s).first;
    // Known amaxes in [first, s-1].
    auto lo = known.lower_bound(first);
    auto hi = known.lower_bound(s);
    const std::int64_t have = std::distance(lo, hi);
    WindowAmax w;
    if (have == s - first) {
      w = window_amax(lo, hi);
    } else if (have > 0) {
      exact = false;
      if (detail.empty())
        detail = "history window [" + std::to_string(first) + ", " + std::to_string(s - 1) +
                 "] has " + std::to_string(have) + " of " + std::to_string(s - first) +
                 " steps; the known ones were used";
      w = window_amax(lo, hi);
    } else if (lo != known.begin()) {
      exact = false;
      const auto prev = std::prev(lo);
      if (detail.empty())
        detail = "no amax known in the history window [" + std::to_string(first) + ", " +
                 std::to_string(s - 1) + "]; used step " + std::to_string(prev->first) +
                 "'s amax";
      w = {prev->second, prev->first};
    } else {
      out.mode = ReplayMode::kUnavailable;
      out.detail = "no amax known before step " + std::to_string(step) +
                   " (capture an earlier step or pass --training-log)";
      return out;
    }
    const float amax = w.amax;
    if (amax > 0.0f && std::isfinite(amax)) {
      float scale = scaled_max / amax;
      if (std::isinf(scale)) scale = FLT_MAX;
      out.mode = exact ? ReplayMode::kExact : ReplayMode::kApproximate;
      out.scale = scale;
      out.amax = amax;
      out.amax_step = w.step;
      out.detail = detail;
      return out;
    }
    --s;  // amax 0, inf or NaN: TE keeps the scale of the step before
  }
  out.mode = ReplayMode::kUnavailable;
  out.detail = "amax history holds no finite nonzero value in the last " +
               std::to_string(kMaxKeepPreviousSteps) + " steps";
  return out;
}

}  // namespace fp8a
