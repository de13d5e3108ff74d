// Numbers in output files: the shortest text that reads back to the same value (std::to_chars),
// "inf", "-inf" and "nan" for the non-finite ones.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>

namespace fp8a {

template <class T>
std::string format_number(T v) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(v)) return "nan";  // to_chars writes "-nan" for a NaN with its sign bit set
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// Numbers in tables people read: `decimals` digits after the point, "inf", "-inf", "nan".
inline std::string format_fixed(double v, int decimals) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace fp8a
