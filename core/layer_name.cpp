#include "core/layer_name.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string_view>
#include <vector>

namespace fp8a {

namespace {

// Megatron-Core's linear modules inside a TransformerLayer.
constexpr std::string_view kMegatronSuffixes[] = {"self_attention.linear_qkv", "self_attention.linear_proj",
                                                  "mlp.linear_fc1", "mlp.linear_fc2"};

// The MoE MLP's linear modules (megatron/core/transformer/moe/): SequentialMLP's experts
// (mlp.experts.local_experts.<E>.linear_fc1), TEGroupedMLP's grouped modules (mlp.experts.linear_fc1,
// every expert in one TE GroupedLinear) and SharedExpertMLP's (mlp.shared_experts.linear_fc1).
bool moe_suffix(const std::string& suffix) {
  for (const char* fc : {"linear_fc1", "linear_fc2"}) {
    if (suffix == std::string("mlp.experts.") + fc || suffix == std::string("mlp.shared_experts.") + fc) return true;
    const std::string local = "mlp.experts.local_experts.", tail = std::string(".") + fc;
    if (suffix.starts_with(local) && suffix.ends_with(tail) && suffix.size() > local.size() + tail.size()) {
      const std::string e = suffix.substr(local.size(), suffix.size() - local.size() - tail.size());
      if (e.size() <= 6 && std::all_of(e.begin(), e.end(), [](char c) { return c >= '0' && c <= '9'; })) return true;
    }
  }
  return false;
}

}  // namespace

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
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return "";
  const std::string module = layer.substr(0, dot);
  const auto s = split_transformer_layer(module);
  return s && (s->suffix == "mlp.experts.linear_fc1" || s->suffix == "mlp.experts.linear_fc2") ? module : "";
}

bool megatron_module_suffix(const std::string& suffix) {
  return std::find(std::begin(kMegatronSuffixes), std::end(kMegatronSuffixes), suffix) !=
             std::end(kMegatronSuffixes) ||
         moe_suffix(suffix);
}

std::optional<TeDumpParts> te_dump_parts(const std::string& layer) {
  std::string_view s = layer;
  if (!s.starts_with("model_")) return std::nullopt;
  s.remove_prefix(6);
  while (s.starts_with("module_")) s.remove_prefix(7);
  TeDumpParts p;
  p.rest = s;
  for (const char* st : {"language_model_", "vision_model_"})
    if (s.starts_with(st)) {
      p.stack = std::string(st).substr(0, std::strlen(st) - 1);
      s.remove_prefix(std::strlen(st));
    }
  std::string block;
  for (const char* b : {"decoder", "encoder"})
    if (s.starts_with(std::string(b) + "_layers_")) block = b;
  if (block.empty()) return p;
  s.remove_prefix(block.size() + 8);
  std::size_t digits = 0;
  while (digits < s.size() && digits < 7 && s[digits] >= '0' && s[digits] <= '9') ++digits;
  if (digits == 0 || digits > 6 || s[0] == '0' || digits >= s.size() || s[digits] != '_') return p;
  p.block = block;
  p.layer_number = std::stoi(std::string(s.substr(0, digits)));
  p.rest = s.substr(digits + 1);
  return p;
}

std::string megatron_name_of_te_dump(const std::string& layer) {
  const std::optional<TeDumpParts> p = te_dump_parts(layer);
  if (!p || p->block.empty()) return "";
  const std::string& rest = p->rest;
  // Megatron's module suffixes, each as its sanitised form (local_experts.<E> with any E).
  std::vector<std::string> suffixes(std::begin(kMegatronSuffixes), std::end(kMegatronSuffixes));
  for (const char* fc : {"linear_fc1", "linear_fc2"}) {
    suffixes.push_back(std::string("mlp.experts.") + fc);
    suffixes.push_back(std::string("mlp.shared_experts.") + fc);
    const std::string local = "mlp_experts_local_experts_", tail = std::string("_") + fc;
    if (rest.starts_with(local) && rest.ends_with(tail) && rest.size() > local.size() + tail.size())
      suffixes.push_back("mlp.experts.local_experts." + rest.substr(local.size(), rest.size() - local.size() - tail.size()) +
                         "." + fc);
  }
  for (const std::string& suffix : suffixes) {
    std::string sanitized = suffix;
    std::replace(sanitized.begin(), sanitized.end(), '.', '_');
    if (sanitized == rest && megatron_module_suffix(suffix))
      return (p->stack.empty() ? "" : p->stack + ".") + p->block + ".layers." + std::to_string(p->layer_number - 1) +
             "." + suffix;
  }
  return "";
}

std::optional<int> transformer_layer_index(const std::string& name) {
  auto s = split_transformer_layer(name);
  if (!s) s = split_transformer_layer(megatron_name_of_te_dump(name));
  if (!s) return std::nullopt;
  return s->index;
}

bool is_te_dump_name(const std::string& layer) {
  return layer.starts_with("model_") && layer.find('.') == std::string::npos;
}

bool is_lm_head(const std::string& layer) { return layer == "output_layer" || layer.ends_with(".output_layer"); }

bool is_moe_router(const std::string& layer) { return layer == "mlp.router" || layer.ends_with(".mlp.router"); }

}  // namespace fp8a
