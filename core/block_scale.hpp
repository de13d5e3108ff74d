// Per-block scales and the saturation boundary, shared by the CPU fake quantisation and the CUDA
// kernels (host and device), so both backends agree by construction.
#pragma once

#include "core/recipe.hpp"
#include "core/scale.hpp"

namespace fp8a {

// fp32 product with one rounding; on the device an intrinsic the compiler never fuses into an FMA
// (host code is built with -ffp-contract=off).
FP8A_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// |x * scale| above this is past the rounding boundary beyond max finite: E4M3 464 (a tie there
// rounds to 448), E5M2 61440 (a tie there would round to inf), so the tests are > 464 and
// >= 61440 (> nextafter(61440, 0)). Such values are what the saturating cast clips.
FP8A_HD float saturation_threshold(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? 464.0f : bits_float(0x476FFFFFu);
}

// |x| as its float bit pattern, NaN as 0. For non-negative floats the order of the patterns is the
// order of the values and NaN patterns lie above inf, so the max of these over a block is the
// block's amax over its non-NaN elements — an integer reduction, which vectorises on the CPU (int32:
// SSE2 compares are signed) and reduces with integer max/atomics on the device.
FP8A_HD std::int32_t abs_bits_not_nan(float x) {
  const auto b = static_cast<std::int32_t>(float_bits(x) & 0x7FFFFFFFu);
  return b > 0x7F800000 ? 0 : b;
}

struct ScalePair {
  float scale;      // x is multiplied by it before the cast
  float scale_inv;  // the FP8 value is multiplied by it to dequantise
};

// One block's scales from its amax (over non-NaN elements):
//   kBlock: TE Float8BlockScaling, compute_scale_from_amax per block (eps 0), an infinite scale
//           becomes value_for_inf (the input type's max finite), optional power of two;
//   kMx:    E8M0, TE's rule (amax * fp32(1/fp8_max) rounded up) or the OCP floor rule.
FP8A_HD ScalePair block_scale(RecipeKind kind, Fp8Format format, bool pow2_scales,
                              MxScaleRule mx_rule, float value_for_inf, float amax) {
  const float fp8_max = fp8_max_finite(format);
  if (kind == RecipeKind::kMx) {
    const std::uint8_t e = mx_rule == MxScaleRule::kTeRoundUp
                               ? e8m0_round_up(mul_rn(amax, 1.0f / fp8_max))
                               : e8m0_ocp_floor(amax, format);
    return {e8m0_scale(e), e8m0_value(e)};
  }
  const float scale = scale_from_amax(amax, fp8_max, pow2_scales, 0.0f, value_for_inf);
  return {scale, scale_inverse(scale)};
}

}  // namespace fp8a
