// Random test inputs shared by the backend tests: the fill cases of TE's cast tests (zeros, float
// subnormals, normal range, a very wide range, near FLT_MAX) and non-finite data. Fixed seeds, so
// failures reproduce.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace fp8a::testing {

enum class Fill { kZeros, kSubnormal, kNormal, kWide, kNearFltMax, kNonFinite };
inline const char* fill_name(Fill f) {
  static const char* names[] = {"zeros", "subnormal", "normal", "wide", "near_flt_max", "nan_inf"};
  return names[static_cast<int>(f)];
}
inline constexpr Fill kFills[] = {Fill::kZeros, Fill::kSubnormal, Fill::kNormal,
                                  Fill::kWide,  Fill::kNearFltMax, Fill::kNonFinite};

inline std::vector<float> make_fill(std::size_t n, Fill kind, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> expo(-40.0f, 20.0f);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float g = normal(rng);
    switch (kind) {
      case Fill::kZeros: v[i] = 0.0f; break;
      case Fill::kSubnormal: v[i] = g * 1e-41f; break;
      case Fill::kNormal: v[i] = g; break;
      case Fill::kWide: v[i] = std::copysign(std::exp2(expo(rng)), g); break;
      case Fill::kNearFltMax: v[i] = g * 3e38f; break;  // |g| > 1.13 overflows to inf
      case Fill::kNonFinite: v[i] = (i / 300) % 2 ? 0.0f : g * 1e-3f; break;
    }
  }
  if (kind == Fill::kNonFinite) {
    for (std::size_t i = 3; i < n; i += 97) v[i] = NAN;
    for (std::size_t i = 11; i < n; i += 131) v[i] = (i % 2) ? INFINITY : -INFINITY;
    if (n > 1) v[n - 1] = NAN;
  }
  return v;
}

}  // namespace fp8a::testing
