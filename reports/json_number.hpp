// Numbers in the JSON outputs (summary.json, recipe.json): JSON has no inf or NaN, so those are
// written as the strings "inf", "-inf" and "nan"; every other value as a JSON number; an absent
// optional as null.
#pragma once

#include <cmath>
#include <optional>
#include <nlohmann/json.hpp>

namespace fp8a {

inline nlohmann::ordered_json json_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// null when there is no value.
inline nlohmann::ordered_json json_number(const std::optional<double>& v) {
  return v ? json_number(*v) : nlohmann::ordered_json(nullptr);
}

}  // namespace fp8a
