// FP8 (OCP OFP8 E4M3 "fn" and E5M2), BF16 and FP16 element codecs.
//
// Encoding is float -> FP8 with round-to-nearest-even and saturation to +-max finite, the way
// Transformer Engine casts (static_cast to __nv_fp8_e4m3 / __nv_fp8_e5m2, i.e. __NV_SATFINITE):
//   - |x| > max finite (448 / 57344), including +-inf, becomes +-max finite;
//   - NaN becomes the positive NaN code 0x7F (CUDA canonicalises float NaN first);
//   - the sign is kept, so tiny negatives become -0 (0x80).
// Decoding is exact (every FP8 value is a float).
// All functions are usable from host and device code.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/host_device.hpp"

namespace fp8a {

enum class Fp8Format : std::uint8_t { kE4M3, kE5M2 };

struct Fp8Traits {
  int mantissa_bits;      // M
  int exponent_bias;      // bias
  int min_normal_exp;     // unbiased exponent of the smallest normal
  float max_finite;       // largest finite value
  std::uint8_t max_code;  // code of +max_finite
  const char* name;
};

// One row per FP8 format, indexed by Fp8Format.
inline constexpr Fp8Traits kFp8Traits[] = {
    {3, 7, -6, 448.0f, 0x7E, "e4m3"},
    {2, 15, -14, 57344.0f, 0x7B, "e5m2"},
};

FP8A_HD float fp8_max_finite(Fp8Format f) { return f == Fp8Format::kE4M3 ? 448.0f : 57344.0f; }

FP8A_HD std::uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
FP8A_HD float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// 2^e for e in [-149, 127], exact.
FP8A_HD float exp2_int(int e) {
  return e >= -126 ? bits_float(static_cast<std::uint32_t>(e + 127) << 23)
                   : bits_float(1u << (e + 149));
}

namespace detail {
template <int M, int kBias, int kMinNormalExp, std::uint32_t kMaxCode>
FP8A_HD std::uint8_t encode_fp8(float x) {
  const std::uint32_t bits = float_bits(x);
  const std::uint8_t sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
  const std::uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits > 0x7F800000u) return 0x7F;  // NaN
  const float a = bits_float(abs_bits);
  const float max_finite = bits_float(static_cast<std::uint32_t>(
      (((kMaxCode >> M) - kBias + 127) << 23) | ((kMaxCode & ((1u << M) - 1)) << (23 - M))));
  if (a > max_finite) return static_cast<std::uint8_t>(sign | kMaxCode);  // satfinite, incl. inf
  if (abs_bits < static_cast<std::uint32_t>(kMinNormalExp + 127) << 23) {
    // Subnormal result: the code is |x| / min_subnormal rounded to nearest even. The product is an
    // exact power-of-two scaling, and a result of 2^M is the smallest normal code, as it should be.
    // rintf rounds half to even in the default rounding mode.
    const float q = a * exp2_int(M - kMinNormalExp);
    return static_cast<std::uint8_t>(sign | static_cast<std::uint32_t>(rintf(q)));
  }
  // Normal result: round the float mantissa to M bits (ties to even) by integer arithmetic.
  constexpr int kDrop = 23 - M;
  const std::uint32_t rounded =
      (abs_bits + ((1u << (kDrop - 1)) - 1u) + ((abs_bits >> kDrop) & 1u)) >> kDrop;
  const std::uint32_t code = rounded - (static_cast<std::uint32_t>(127 - kBias) << M);
  return static_cast<std::uint8_t>(sign | code);
}

template <int M, int kBias, int kMinNormalExp>
FP8A_HD float decode_fp8(std::uint8_t code) {
  const bool negative = (code & 0x80u) != 0;
  const std::uint32_t e = (code & 0x7Fu) >> M;
  const std::uint32_t m = code & ((1u << M) - 1u);
  float v;
  if (e == 0) {
    v = static_cast<float>(m) * exp2_int(kMinNormalExp - M);
  } else {
    v = bits_float(((e - kBias + 127) << 23) | (m << (23 - M)));
  }
  return negative ? -v : v;
}

// decode(encode(x)) computed directly on the float, without codes: the nearest FP8 value with
// x's sign, saturated to +-max (+-inf included). Branch-free, so loops over it vectorise. Equal to
// decode(encode(x)) for every non-NaN x (tested over all midpoints and random floats); NaN gives
// NaN, as decoding the NaN code would.
template <int M, int kMinNormalExp>
FP8A_HD float round_trip_fp8(float x, float max_finite) {
  const std::uint32_t bits = float_bits(x);
  const std::uint32_t abs_bits = bits & 0x7FFFFFFFu;
  const float a = bits_float(abs_bits);
  constexpr int kDrop = 23 - M;
  const float normal = bits_float(
      ((abs_bits + ((1u << (kDrop - 1)) - 1u) + ((abs_bits >> kDrop) & 1u)) >> kDrop) << kDrop);
  // Adding 2^(23 + emin - M) makes the float's ulp the smallest FP8 subnormal, so the addition
  // itself rounds to nearest even on the subnormal grid; subtracting it back is exact.
  const float magic = exp2_int(23 + kMinNormalExp - M);
  const float subnormal = (a + magic) - magic;
  float v = a < exp2_int(kMinNormalExp) ? subnormal : normal;
  v = a > max_finite ? max_finite : v;
  v = a == a ? v : a;  // NaN stays NaN (the rounding above may carry a NaN payload into zero)
  return bits_float(float_bits(v) | (bits & 0x80000000u));
}
}  // namespace detail

FP8A_HD float round_trip_e4m3(float x) { return detail::round_trip_fp8<3, -6>(x, 448.0f); }
FP8A_HD float round_trip_e5m2(float x) { return detail::round_trip_fp8<2, -14>(x, 57344.0f); }

FP8A_HD std::uint8_t encode_e4m3(float x) { return detail::encode_fp8<3, 7, -6, 0x7E>(x); }
FP8A_HD std::uint8_t encode_e5m2(float x) { return detail::encode_fp8<2, 15, -14, 0x7B>(x); }

// E4M3: 0x7F/0xFF are NaN. E5M2: exponent 31 is inf (mantissa 0) or NaN.
FP8A_HD float decode_e4m3(std::uint8_t code) {
  if ((code & 0x7Fu) == 0x7Fu) return bits_float(0x7FC00000u);
  return detail::decode_fp8<3, 7, -6>(code);
}
FP8A_HD float decode_e5m2(std::uint8_t code) {
  if ((code & 0x7Cu) == 0x7Cu) {
    if ((code & 0x03u) != 0) return bits_float(0x7FC00000u);
    return bits_float((code & 0x80u) ? 0xFF800000u : 0x7F800000u);
  }
  return detail::decode_fp8<2, 15, -14>(code);
}

FP8A_HD std::uint8_t encode_fp8(Fp8Format f, float x) {
  return f == Fp8Format::kE4M3 ? encode_e4m3(x) : encode_e5m2(x);
}
FP8A_HD float decode_fp8(Fp8Format f, std::uint8_t code) {
  return f == Fp8Format::kE4M3 ? decode_e4m3(code) : decode_e5m2(code);
}

// 0x00 and 0x80 are the two zero codes in both formats.
FP8A_HD bool fp8_is_zero(std::uint8_t code) { return (code & 0x7Fu) == 0; }

// ---- 16-bit input types -------------------------------------------------------------------

FP8A_HD float bf16_to_float(std::uint16_t h) { return bits_float(static_cast<std::uint32_t>(h) << 16); }

// float -> bf16 round-to-nearest-even; NaN -> 0x7FC0 (PyTorch's choice); overflow -> inf.
FP8A_HD std::uint16_t float_to_bf16(float x) {
  const std::uint32_t u = float_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | 0x7FC0u);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// IEEE binary16 -> float, exact (subnormals, inf, NaN included).
FP8A_HD float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1Fu;
  const std::uint32_t m = h & 0x3FFu;
  std::uint32_t u;
  if (e == 0x1F) {
    u = sign | 0x7F800000u | (m << 13);
  } else if (e != 0) {
    u = sign | ((e - 15 + 127) << 23) | (m << 13);
  } else {
    const float v = static_cast<float>(m) * exp2_int(-24);
    u = sign | float_bits(v);
  }
  return bits_float(u);
}

}  // namespace fp8a
