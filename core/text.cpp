#include "core/text.hpp"

#include <cstdio>

namespace fp8a {

std::string shape_text(std::span<const std::int64_t> shape, ShapeStyle style) {
  const bool tuple = style == ShapeStyle::kTuple;
  const char* separator = style == ShapeStyle::kCrossed ? "x" : ", ";
  std::string s = tuple ? "(" : "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? separator : "") + std::to_string(shape[i]);
  if (tuple && shape.size() == 1) s += ",";  // (4,): a one-element tuple
  return s + (tuple ? ")" : "]");
}

std::string quoted(std::string_view s, QuoteStyle style) {
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < style.max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (style.escape && (c < 0x20 || c == 0x7F || c == '\'' || c == '\\')) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > style.max_bytes) out += "...";
  return out + "'";
}

}  // namespace fp8a
