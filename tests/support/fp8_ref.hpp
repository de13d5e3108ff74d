// Deliberately simple, independent FP8 references for tests. They share no code with
// core: values come from the OCP OFP8 definition evaluated in double with std::ldexp, and
// encoding is a nearest-value search over the table of all finite codes.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace fp8a::ref {

struct Fp8Spec {
  int exp_bits, man_bits, bias;
  bool e4m3;  // E4M3 "fn": no inf, only S.1111.111 is NaN
};
inline constexpr Fp8Spec kE4M3{4, 3, 7, true};
inline constexpr Fp8Spec kE5M2{5, 2, 15, false};

// Value of a code by the OFP8 definition; NaN for NaN codes, +-inf for E5M2 inf.
inline double decode_ref(const Fp8Spec& s, unsigned code) {
  const double sign = (code & 0x80u) ? -1.0 : 1.0;
  const unsigned e = (code >> s.man_bits) & ((1u << s.exp_bits) - 1);
  const unsigned m = code & ((1u << s.man_bits) - 1);
  const unsigned e_max = (1u << s.exp_bits) - 1;
  if (s.e4m3 && e == e_max && m == (1u << s.man_bits) - 1) return std::numeric_limits<double>::quiet_NaN();
  if (!s.e4m3 && e == e_max)
    return m == 0 ? sign * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  if (e == 0) return sign * std::ldexp(static_cast<double>(m), 1 - s.bias - s.man_bits);
  return sign * std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -s.man_bits), static_cast<int>(e) - s.bias);
}

// Non-negative finite codes in increasing value order, with their values.
inline std::vector<std::pair<double, unsigned>> positive_table(const Fp8Spec& s) {
  std::vector<std::pair<double, unsigned>> t;
  for (unsigned c = 0; c < 0x80; ++c) {
    const double v = decode_ref(s, c);
    if (std::isfinite(v)) t.emplace_back(v, c);
  }
  return t;  // codes 0..max are already in increasing order
}

// Round-to-nearest-even with saturation to +-max finite; NaN -> 0x7F. Returns the code.
inline unsigned encode_ref(const Fp8Spec& s, float x) {
  static const auto e4 = positive_table(kE4M3);
  static const auto e5 = positive_table(kE5M2);
  const auto& t = s.e4m3 ? e4 : e5;
  if (std::isnan(x)) return 0x7F;
  const unsigned sign = std::signbit(x) ? 0x80u : 0u;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= t.back().first) return sign | t.back().second;
  std::size_t hi = 1;
  while (t[hi].first <= a) ++hi;  // t[hi-1] <= a < t[hi]
  const auto& lo_e = t[hi - 1];
  const auto& hi_e = t[hi];
  const double dlo = a - lo_e.first, dhi = hi_e.first - a;
  unsigned code;
  if (dlo < dhi) code = lo_e.second;
  else if (dhi < dlo) code = hi_e.second;
  else code = (lo_e.second % 2 == 0) ? lo_e.second : hi_e.second;
  return sign | code;
}

inline double max_finite_ref(const Fp8Spec& s) { return positive_table(s).back().first; }

}  // namespace fp8a::ref
