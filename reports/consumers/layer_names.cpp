#include "reports/consumers/layer_names.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <string_view>
#include <vector>

namespace fp8a {
namespace {

// The module a captured layer is: itself, a grouped module for one of its experts, or the module
// a TE dump's name stands for.
std::string module_of(const std::string& layer) {
  if (std::string m = grouped_module_of(layer); !m.empty()) return m;
  if (std::string m = megatron_name_of_te_dump(layer); !m.empty()) return m;
  return layer;
}


// Megatron's MoE router (TopKRouter): its gating GEMM is a plain torch linear in FP32 or BF16,
// never a TE module, so no FP8 config reaches it.
constexpr const char* kRouterNote =
    "Megatron's MoE router is not a TE module: its gating GEMM never runs in FP8, and no config reaches it";

// Where a transformer layer sits in a captured name: the block holding the ModuleList
// ("decoder", "encoder"; "" when the name starts at "layers."), and the stack above it
// ("language_model", "vision_model"; "" for a single model), the leading wrappers left out
// ("module." of DDP and Float16Module, "model." of a training wrapper or HF's causal-LM class).
struct LayerPlace {
  TransformerLayerName layer;
  std::string stack, block;
};

std::optional<LayerPlace> place_of(const std::string& name) {
  const auto s = split_transformer_layer(name);
  if (!s) return std::nullopt;
  LayerPlace p{*s, "", ""};
  std::vector<std::string> parts;
  const std::string prefix = name.substr(0, s->start);  // "" or ending in '.'
  for (std::size_t b = 0; b < prefix.size();) {
    const std::size_t e = prefix.find('.', b);
    parts.push_back(prefix.substr(b, e - b));
    b = e + 1;
  }
  std::size_t first = 0;
  while (first < parts.size() && (parts[first] == "module" || parts[first] == "model")) ++first;
  if (first < parts.size()) {
    p.block = parts.back();
    for (std::size_t i = first; i + 1 < parts.size(); ++i) p.stack += (p.stack.empty() ? "" : ".") + parts[i];
  }
  return p;
}

// Megatron's module path of a TE dump's name that megatron_name_of_te_dump cannot restore (the
// debug API's name with every '.' made '_'): within its own model, as Megatron names modules
// (te_dump_parts: wrappers and stack dropped, "<block>.layers.<N - 1>.", Megatron counting from
// 0 where the debug API's layer_number counts from 1); the rest keeps its '_'s, each of which may
// be a '.'.
MappedName megatron_path_of_dump(const TeDumpParts& p) {
  const std::string name =
      p.block.empty() ? p.rest : p.block + ".layers." + std::to_string(p.layer_number - 1) + "." + p.rest;
  return {name, true, "a TE dump's name (every '.' made '_'): each '_' of the module matched as '.' or '_'", true};
}

}  // namespace

MappedName megatron_module_path(const std::string& captured) {
  const std::string layer = module_of(captured);
  if (is_lm_head(layer)) return {"output_layer", false, ""};
  if (is_te_dump_name(layer)) return megatron_path_of_dump(*te_dump_parts(layer));
  const auto p = place_of(layer);
  if (!p) return {layer, true, "not a Megatron transformer-layer name; used as captured"};
  const std::string block = p->block.empty() ? "decoder" : p->block;
  MappedName m{block + ".layers." + std::to_string(p->layer.index) + "." + p->layer.suffix, false, ""};
  if (p->layer.suffix == "mlp.router") {
    m.guess = true;
    m.note = kRouterNote;
  } else if (!megatron_module_suffix(p->layer.suffix)) {
    m.guess = true;
    m.note = "'" + p->layer.suffix + "' is not one of Megatron's linear modules; mapped by its layer index";
  } else if (p->block.empty()) {
    m.guess = true;
    m.note = "captured without 'decoder.'; taken as Megatron's decoder.layers." + std::to_string(p->layer.index);
  } else if (p->block != "decoder" && p->block != "encoder") {
    m.guess = true;
    m.note = "'" + p->block + "' is not a Megatron TransformerBlock attribute; used as captured";
  }
  if (!p->stack.empty())
    m.note += std::string(m.note.empty() ? "" : "; ") + "in the model '" + p->stack +
              "': Megatron names a module by its path within its own model, so another stack's layer " +
              std::to_string(p->layer.index) + " has this name too";
  return m;
}

MappedName nvdlfw_layer_name(const std::string& captured) {
  const std::string layer = module_of(captured);
  if (is_lm_head(layer))
    return {"output_layer", true, "Megatron's LM head is not a TE module: TE's debug features never see it"};
  // The debug API's own name, '.' made '_': matched whole, '.' or '_' at each '_'.
  if (is_te_dump_name(layer))
    return {layer, true, "a TE dump's name (every '.' made '_'): each '_' matched as '.' or '_'", true};
  const auto p = place_of(layer);
  if (!p) return {layer, true, "not a transformer-layer name; used as captured"};
  const std::string block = p->block.empty() ? "decoder" : p->block;
  MappedName m{(p->stack.empty() ? "" : p->stack + ".") + block + ".layers." + std::to_string(p->layer.index + 1) +
                   "." + p->layer.suffix,
               false,
               "layer_number " + std::to_string(p->layer.index + 1) +
                   ": the captured index + 1, plus the stage's first layer under pipeline parallelism"};
  if (p->layer.suffix == "mlp.router") {
    m.guess = true;
    m.note += std::string("; ") + kRouterNote;
  } else if (!megatron_module_suffix(p->layer.suffix)) {
    m.guess = true;
    m.note += "; '" + p->layer.suffix + "' is not one of Megatron's linear modules";
  }
  return m;
}

MappedName captured_name(const std::string& layer) { return {module_of(layer), false, ""}; }

std::vector<ModuleGroup> module_groups(const std::vector<LayerDecision>& layers,
                                       MappedName (*map)(const std::string&), NameMatch match) {
  const std::size_t n = layers.size();
  std::vector<MappedName> names;
  for (const LayerDecision& l : layers) names.push_back(map(l.layer));
  // Union-find over the layers, joined where the consumer's names select a common module.
  std::vector<std::size_t> parent(n);
  for (std::size_t i = 0; i < n; ++i) parent[i] = i;
  const auto root = [&](std::size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  const auto join = [&](std::size_t a, std::size_t b) {
    a = root(a), b = root(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  };
  std::map<std::string, std::size_t> first_of;  // a name -> the first layer with it
  for (std::size_t i = 0; i < n; ++i) {
    const auto [it, fresh] = first_of.emplace(names[i].name, i);
    if (!fresh) join(it->second, i);
  }
  if (match == NameMatch::kDotSuffix)  // a name also selects every module whose path ends in "." + it
    for (std::size_t i = 0; i < n; ++i) {
      const std::string& name = names[i].name;
      for (std::size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
        if (const auto it = first_of.find(name.substr(dot + 1)); it != first_of.end()) join(it->second, i);
    }
  std::vector<ModuleGroup> groups;
  std::map<std::size_t, std::size_t> group_of;  // root -> index in groups
  for (std::size_t i = 0; i < n; ++i) {
    const auto [it, fresh] = group_of.emplace(root(i), groups.size());
    if (fresh) groups.push_back({names[i], {}});
    ModuleGroup& g = groups[it->second];
    g.layers.push_back(i);
    // Under kDotSuffix the shortest name ends every other one of the group (each join pairs a name
    // with one of its own dot-suffixes, and those form a chain): it selects them all.
    if (names[i].name.size() < g.name.name.size()) g.name = names[i];
  }
  return groups;
}

MergedMembers merge_members(std::span<const MemberPlan> members) {
  MergedMembers m;
  if (members.empty()) return m;
  m.precision = members.front().precision;
  m.candidate = members.front().candidate;
  for (const MemberPlan& p : members) {
    m.recipes_agree = m.recipes_agree && p.candidate == members.front().candidate;
    for (std::size_t g = 0; g < 3; ++g)
      if (p.precision[g] == Precision::kBf16) m.precision[g] = Precision::kBf16;
  }
  if (!m.recipes_agree) {
    m.precision.fill(Precision::kBf16);
    m.candidate.reset();
  }
  return m;
}

}  // namespace fp8a
