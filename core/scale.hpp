// Scale formulas shared by every backend (host and device).
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "core/fp8_codec.hpp"

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

// ---- E8M0 (MXFP8 block scales) -------------------------------------------------------------

// TE's float_to_e8m0 (round up, saturating): NaN -> 0xFF, inf -> 0xFE, 0 -> 0x00; otherwise the
// exponent of y rounded up to a power of two, at most 0xFE; y <= 2^-127 gives 0x00.
FP8A_HD std::uint8_t e8m0_round_up(float y) {
  const std::uint32_t u = float_bits(y) & 0x7FFFFFFFu;
  if (u > 0x7F800000u) return 0xFF;
  if (u == 0x7F800000u) return 0xFE;
  if (u == 0) return 0x00;
  std::uint32_t exponent = u >> 23;
  const std::uint32_t mantissa = u & 0x7FFFFFu;
  if (mantissa > 0 && exponent != 0xFE && !(exponent == 0 && mantissa <= 0x400000u)) ++exponent;
  return static_cast<std::uint8_t>(exponent);
}

// The OCP MX reference rule (microxcaling _quantize_mx): shared exponent
// floor(log2(amax)) - emax_elem (8 for E4M3, 15 for E5M2), raised to at least -127; above 127 it
// is NaN (0xFF). amax 0 gives -127; NaN or inf amax gives 0xFF.
FP8A_HD std::uint8_t e8m0_ocp_floor(float amax, Fp8Format f) {
  const std::uint32_t u = float_bits(amax) & 0x7FFFFFFFu;
  if (u >= 0x7F800000u) return 0xFF;
  const int emax = f == Fp8Format::kE4M3 ? 8 : 15;
  int floor_log2;
  if (u == 0) return 0x00;
  if ((u >> 23) != 0) {
    floor_log2 = static_cast<int>(u >> 23) - 127;
  } else {  // subnormal: position of the highest set mantissa bit
    int bit = 22;
    while (((u >> bit) & 1u) == 0) --bit;
    floor_log2 = bit - 149;
  }
  int e = floor_log2 - emax + 127;
  if (e < 0) e = 0;
  if (e > 254) return 0xFF;
  return static_cast<std::uint8_t>(e);
}

// 2^(e - 127), the dequantisation factor of an E8M0 code (TE's scale_inv); 0xFF is NaN.
FP8A_HD float e8m0_value(std::uint8_t e) {
  if (e == 0xFF) return bits_float(0x7FC00000u);
  if (e == 0) return bits_float(0x00400000u);  // 2^-127, a float subnormal
  return bits_float(static_cast<std::uint32_t>(e) << 23);
}

// 2^(127 - e), the quantisation factor (TE's exp2f_rcp): 0xFF is NaN, 0xFE gives 2^-127.
FP8A_HD float e8m0_scale(std::uint8_t e) {
  if (e == 0xFF) return bits_float(0x7FC00000u);
  if (e == 0xFE) return bits_float(0x00400000u);
  return bits_float(static_cast<std::uint32_t>(254 - e) << 23);
}

}  // namespace fp8a
