// Replay of Transformer Engine's delayed scaling (DelayedScaling) over training steps.
//
// TE keeps, per tensor, an amax history of the last H steps and a scale. At step t it casts with
// the scale computed after step t-1 from the history then: amax = max over steps [t-H, t-1]
// (algo max) or amax of step t-1 (most_recent); scale = (fp8_max * 2^-margin) / amax in fp32,
// +inf -> FLT_MAX; an amax of 0, inf or NaN keeps the previous scale. History starts at zeros and
// the scale at 1, so step 0 casts with scale 1 (common/recipe/delayed_scaling.cu,
// pytorch/quantization.py _default_sf_compute). No power-of-two rounding.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/recipe.hpp"

namespace fp8a {

enum class ReplayMode { kExact, kApproximate, kUnavailable };
const char* replay_mode_name(ReplayMode m);

struct ReplayedScale {
  ReplayMode mode = ReplayMode::kUnavailable;
  float scale = 1.0f;   // meaningful unless unavailable
  std::string detail;   // why approximate or unavailable; empty when exact
};

// amax_by_step: the amaxes known for this tensor (an amax trace and/or captured steps). The
// replay is exact when every step of every window it reads is known; otherwise windows use the
// known steps they contain, or the latest known step before them (approximate); with no known
// step before t it is unavailable (except t = 0, where TE's scale is 1).
ReplayedScale replay_delayed_scale(const std::map<std::int64_t, float>& amax_by_step,
                                   std::int64_t step, const Recipe& recipe, Fp8Format format);

}  // namespace fp8a
