#include "core/layer_name.hpp"

#include <algorithm>
#include <cctype>

namespace fp8a {

std::optional<TransformerLayerName> split_transformer_layer(const std::string& name) {
  for (std::size_t pos = name.find("layers."); pos != std::string::npos; pos = name.find("layers.", pos + 1)) {
    if (pos > 0 && name[pos - 1] != '.') continue;
    std::size_t i = pos + 7, j = i;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j])) != 0) ++j;
    if (j == i || j - i > 6 || j >= name.size() || name[j] != '.') continue;
    return TransformerLayerName{pos, std::stoi(name.substr(i, j - i)), name.substr(j + 1)};
  }
  return std::nullopt;
}

std::string grouped_module_of(const std::string& layer) {
  const std::size_t dot = layer.rfind('.');
  if (dot == std::string::npos || layer.compare(dot + 1, 6, "expert") != 0) return "";
  const std::string digits = layer.substr(dot + 7);
  if (digits.empty() || digits.size() > 6 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return "";
  const std::string module = layer.substr(0, dot);
  const auto s = split_transformer_layer(module);
  return s && (s->suffix == "mlp.experts.linear_fc1" || s->suffix == "mlp.experts.linear_fc2") ? module : "";
}

std::optional<int> transformer_layer_index(const std::string& name) {
  const auto s = split_transformer_layer(name);
  if (!s) return std::nullopt;
  return s->index;
}

}  // namespace fp8a
