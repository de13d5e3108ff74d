// Replay of Transformer Engine's delayed scaling (DelayedScaling) over training steps: the scale
// TE casts step t with, from the amaxes of earlier steps. The rule is METRICS.md's "scale
// (delayed)" row (TE common/recipe/delayed_scaling.cu, pytorch/quantization.py
// _default_sf_compute); tests/engine/test_delayed_replay.cpp checks it against its own reference.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/amax_by_step.hpp"
#include "core/delayed_window.hpp"
#include "core/recipe.hpp"

namespace fp8a {

enum class ReplayMode { kExact, kApproximate, kUnavailable };
const char* replay_mode_name(ReplayMode m);

struct ReplayedScale {
  ReplayMode mode = ReplayMode::kUnavailable;
  float scale = 1.0f;   // meaningful unless unavailable
  std::string detail;   // why approximate or unavailable; empty when exact
  // The window amax the scale comes from (core/delayed_window.hpp window_amax: finite and
  // nonzero) and the step it was logged at; NaN and -1 at step 0 (TE's initial scale 1) and
  // when unavailable. The amax above which the step saturates is amax * 2^margin.
  float amax = NAN;
  std::int64_t amax_step = -1;
};

// amax_by_step: the amaxes known for this tensor (an amax trace and/or captured steps). The
// replay is exact when every step of every window it reads is known; otherwise windows use the
// known steps they contain, or the latest known step before them (approximate); with no known
// step before t it is unavailable (except t = 0, where TE's scale is 1).
ReplayedScale replay_delayed_scale(const AmaxByStep& amax_by_step,
                                   std::int64_t step, const Recipe& recipe, Fp8Format format);

// The same replay for many steps of one series (report.html's threshold line at every step of a
// trace): the window maxima of the series are tabled once (a sparse table of window_amax), so
// each step reads its windows in constant time where replay_delayed_scale scans them (O(window)).
// at(step) == replay_delayed_scale(amax_by_step, step, recipe, format) for every step.
class DelayedReplay {
 public:
  DelayedReplay(const AmaxByStep& amax_by_step, const Recipe& recipe, Fp8Format format);
  ReplayedScale at(std::int64_t step) const;

 private:
  std::vector<std::pair<std::int64_t, float>> entries_;
  std::vector<std::vector<WindowAmax>> table_;  // table_[k][i]: window_amax of entries [i, i + 2^k)
  Recipe recipe_;
  Fp8Format format_;
};

}  // namespace fp8a
