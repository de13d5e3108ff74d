// Numbers in output files: the shortest text that reads back to the same value (std::to_chars),
// "inf", "-inf" and "nan" for the non-finite ones.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>

namespace fp8a {

template <class T>
std::string format_number(T v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace fp8a
