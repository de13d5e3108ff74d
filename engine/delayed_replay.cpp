#include "engine/delayed_replay.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <iterator>
#include <vector>

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

// The replay of `step` over the known amaxes [begin, end) (pairs (step, amax) in step order);
// lower(s) is the first at or after step s and window(lo, hi) window_amax of [lo, hi). The one rule
// both entry points below run: a map scans each window, DelayedReplay reads its table.
template <class It, class Lower, class Window>
ReplayedScale replay_at(It begin, std::int64_t step, const Recipe& recipe, Fp8Format format, const Lower& lower,
                        const Window& window) {
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
    const It lo = lower(first), hi = lower(s);
    const std::int64_t have = std::distance(lo, hi);
    WindowAmax w;
    if (have == s - first) {
      w = window(lo, hi);
    } else if (have > 0) {
      exact = false;
      if (detail.empty())
        detail = "history window [" + std::to_string(first) + ", " + std::to_string(s - 1) +
                 "] has " + std::to_string(have) + " of " + std::to_string(s - first) +
                 " steps; the known ones were used";
      w = window(lo, hi);
    } else if (lo != begin) {
      exact = false;
      const auto& prev = *std::prev(lo);
      if (detail.empty())
        detail = "no amax known in the history window [" + std::to_string(first) + ", " +
                 std::to_string(s - 1) + "]; used step " + std::to_string(prev.first) + "'s amax";
      w = {prev.second, prev.first};
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

}  // namespace

ReplayedScale replay_delayed_scale(const AmaxByStep& known, std::int64_t step,
                                   const Recipe& recipe, Fp8Format format) {
  using It = AmaxByStep::const_iterator;
  return replay_at(
      known.begin(), step, recipe, format, [&](std::int64_t s) { return known.lower_bound(s); },
      [](It lo, It hi) { return window_amax(lo, hi); });
}

DelayedReplay::DelayedReplay(const AmaxByStep& known, const Recipe& recipe, Fp8Format format)
    : entries_(known.begin(), known.end()), recipe_(recipe), format_(format) {
  // table_[k][i]: window_amax of entries [i, i + 2^k), each level joined from the one below.
  const std::size_t n = entries_.size();
  if (n == 0) return;
  std::vector<WindowAmax> level;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) level.push_back(window_amax(it, it + 1));
  table_.push_back(std::move(level));
  for (std::size_t half = 1; 2 * half <= n; half *= 2) {
    const std::vector<WindowAmax>& below = table_.back();
    level.clear();
    for (std::size_t i = 0; i + 2 * half <= n; ++i) level.push_back(join_window_amax(below[i], below[i + half]));
    table_.push_back(std::move(level));
  }
}

ReplayedScale DelayedReplay::at(std::int64_t step) const {
  using It = std::vector<std::pair<std::int64_t, float>>::const_iterator;
  const It begin = entries_.begin();
  const auto lower = [&](std::int64_t s) {
    return std::lower_bound(begin, entries_.end(), s, [](const auto& e, std::int64_t v) { return e.first < v; });
  };
  const auto window = [&](It lo, It hi) {
    if (lo == hi) return WindowAmax{};
    const auto i = static_cast<std::size_t>(lo - begin), j = static_cast<std::size_t>(hi - begin);
    const auto k = static_cast<std::size_t>(std::bit_width(j - i) - 1);  // two blocks of 2^k cover [i, j)
    return join_window_amax(table_[k][i], table_[k][j - (std::size_t{1} << k)]);
  };
  return replay_at(begin, step, recipe_, format_, lower, window);
}

}  // namespace fp8a
