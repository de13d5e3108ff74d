// Scale formulas shared by every backend (host and device).
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "engine/core/fp8_codec.hpp"

namespace fp8a {

// Transformer Engine's compute_scale_from_amax (common/recipe/recipe_common.cuh):
//   amax < epsilon -> epsilon (NaN passes through); amax 0, inf or NaN -> scale 1;
//   scale = fp8_max / amax (IEEE fp32 division); +inf -> value_for_inf;
//   pow2 -> keep sign and exponent bits only (rounds the scale down to a power of two).
FP8A_HD float scale_from_amax(float amax, float fp8_max, bool pow2, float epsilon,
                              float value_for_inf = FLT_MAX) {
  if (amax < epsilon) amax = epsilon;
  if (amax == 0.0f || !(amax == amax) || amax == INFINITY) return 1.0f;
  float scale = fp8_max / amax;
  if (scale == INFINITY) scale = value_for_inf;
  if (pow2) scale = bits_float(float_bits(scale) & 0xFF800000u);
  return scale;
}

// TE stores scale_inv = 1 / scale rounded to nearest (__frcp_rn); dequantisation multiplies by it.
FP8A_HD float scale_inverse(float scale) { return 1.0f / scale; }

}  // namespace fp8a
