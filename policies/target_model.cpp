#include "policies/target_model.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/layer_name.hpp"
#include "core/suggest.hpp"
#include "core/text.hpp"
#include "datasets/capture.hpp"
#include "datasets/file_system.hpp"
#include "policies/json_input.hpp"

namespace fp8a {
namespace {

constexpr InputId kShapesNotJson = "fp8a.shapes.951";
constexpr InputId kShapesKey = "fp8a.shapes.952";  // unknown or missing
constexpr InputId kShapesWrongType = "fp8a.shapes.953";
constexpr InputId kShapesOutOfRange = "fp8a.shapes.954";
constexpr InputId kShapesRepeatedKey = "fp8a.shapes.955";
constexpr JsonInputKind kShapesFile{"shapes file",     kShapesNotJson,     kShapesKey,
                                    kShapesWrongType,  kShapesOutOfRange,  kShapesRepeatedKey,
                                    "a shapes file's objects have a handful (docs/OPTIONS.md --price-as)"};

constexpr double kLlama2Tokens = 4194304;  // Llama 2's global batch: 4M tokens (Touvron et al. 2023, 2.2)

// A dense decoder-only model in Megatron-Core's fused modules: linear_qkv [q + 2 kv heads], fc1
// [2 ffn] under SwiGLU (gate and up in one module), output_layer [vocab].
TargetModel dense_model(const char* name, const char* source, std::int64_t layers, std::int64_t hidden,
                        std::int64_t heads, std::int64_t kv_heads, std::int64_t ffn, std::int64_t vocab) {
  TargetModel t;
  t.name = name;
  t.source = source;
  t.tokens_per_step = kLlama2Tokens;
  t.tokens_source = "Llama 2's 4M-token global batch";
  const std::int64_t head_dim = hidden / heads;
  t.roles[0] = {hidden + 2 * kv_heads * head_dim, hidden, layers, {}};
  t.roles[1] = {hidden, hidden, layers, {}};
  t.roles[2] = {2 * ffn, hidden, layers, {}};
  t.roles[3] = {hidden, ffn, layers, {}};
  t.roles[4] = {vocab, hidden, 1, {}};
  return t;
}

const std::vector<TargetModel>& presets() {
  static const std::vector<TargetModel> p = {
      dense_model("llama-7b",
                  "Llama-2-7B (Hugging Face meta-llama/Llama-2-7b-hf config.json: hidden 4096, 32 layers, 32 heads, "
                  "FFN 11008 SwiGLU, vocab 32000)",
                  32, 4096, 32, 32, 11008, 32000),
      dense_model("llama-70b",
                  "Llama-2-70B (Hugging Face meta-llama/Llama-2-70b-hf config.json: hidden 8192, 80 layers, 64 heads, "
                  "8 KV heads, FFN 28672 SwiGLU, vocab 32000)",
                  80, 8192, 64, 8, 28672, 32000),
  };
  return p;
}

// The name's module path: a TE dump's as its Megatron module, an expert of a grouped module as
// that module.
std::string module_path(const std::string& layer) {
  std::string name = layer;
  if (is_te_dump_name(name))
    if (std::string m = megatron_name_of_te_dump(name); !m.empty()) name = std::move(m);
  if (std::string g = grouped_module_of(name); !g.empty()) name = std::move(g);
  return name;
}

bool ends_with_module(const std::string& name, const std::string& suffix) {
  return !suffix.empty() && (name == suffix || (name.size() > suffix.size() && name.ends_with(suffix) &&
                                                name[name.size() - suffix.size() - 1] == '.'));
}

bool one_of(std::string_view s, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

bool attention_parent(std::string_view p) {
  return one_of(p, {"attn", "attention", "self_attention", "self_attn", "attention.self"}) || p.ends_with("attn") ||
         p.ends_with("attention");
}

}  // namespace

const char* module_role_name(ModuleRole role) {
  switch (role) {
    case ModuleRole::kQkv: return "qkv";
    case ModuleRole::kProj: return "proj";
    case ModuleRole::kFc1: return "fc1";
    case ModuleRole::kFc2: return "fc2";
    case ModuleRole::kHead: return "head";
  }
  return "qkv";
}

std::span<const TargetModel> target_model_presets() { return presets(); }

const TargetModel* find_target_model(std::string_view name) {
  for (const TargetModel& t : presets())
    if (t.name == name) return &t;
  return nullptr;
}

TargetModel parse_target_model(std::string_view json_text, std::string_view origin) {
  const std::string where = quoted_input(origin, 200);
  const Json j = parse_json_input(json_text, where, kShapesFile);
  const ObjectReader top(j, "", where, kShapesFile);
  top.only({"name", "source", "tokens_per_step", "layers", "roles"});
  TargetModel t;
  t.name = "shapes file " + where;
  top.text("name", &t.name);
  top.text("source", &t.source);
  if (t.source.empty()) t.source = "shapes file " + where;
  std::int64_t tokens = 0, layers = 0;
  top.integer("tokens_per_step", 1, kMaxTokensPerStep, &tokens);
  top.integer("layers", 1, 1'000'000, &layers);
  if (tokens == 0)
    throw input_error(kShapesKey, top.prefix() + "missing key \"tokens_per_step\" (tokens of one training step)");
  t.tokens_per_step = static_cast<double>(tokens);
  t.tokens_source = "shapes file " + where;
  if (top.object("roles") == nullptr)
    throw input_error(kShapesKey, top.prefix() + "missing key \"roles\" (qkv, proj, fc1, fc2, head: each {\"n\", \"k\"})");
  const ObjectReader roles = top.child("roles");
  std::vector<std::string> role_keys;
  for (ModuleRole r : kModuleRoles) role_keys.push_back(module_role_name(r));
  roles.only(role_keys);
  bool any = false;
  for (ModuleRole r : kModuleRoles) {
    const char* key = module_role_name(r);
    if (roles.object(key) == nullptr) continue;
    const ObjectReader o = roles.child(key);
    o.only({"n", "k", "count", "names"});
    RoleShape& s = t.roles[static_cast<std::size_t>(r)];
    constexpr std::int64_t kMaxDim = std::int64_t{1} << 31;
    o.integer("n", 1, kMaxDim, &s.n);
    o.integer("k", 1, kMaxDim, &s.k);
    s.count = r == ModuleRole::kHead ? 1 : layers;
    o.integer("count", 1, 1'000'000'000, &s.count);
    if (s.n == 0 || s.k == 0)
      throw input_error(kShapesKey,
                        o.prefix() + "missing key " + quoted_input(o.name(s.n == 0 ? "n" : "k")) + " (W is [n, k])");
    if (s.count == 0)
      throw input_error(kShapesKey, o.prefix() + "missing key " + quoted_input(o.name("count")) +
                                               " (or a top-level \"layers\": how many such modules the model has)");
    if (auto names = o.strings("names")) {
      for (const std::string& n : *names)
        if (n.empty() || n.size() > 200)
          throw input_error(kShapesOutOfRange, o.prefix() + o.name("names") + " holds a name of " +
                                                   std::to_string(n.size()) + " bytes; expected 1 to 200");
      s.names = std::move(*names);
    }
    any = true;
  }
  if (!any) throw input_error(kShapesKey, roles.prefix() + "\"roles\" names no role (qkv, proj, fc1, fc2, head)");
  return t;
}

TargetModel load_target_model(std::string_view name_or_path, const FileSystem& fs) {
  if (const TargetModel* t = find_target_model(name_or_path)) return *t;
  std::vector<std::string> names;
  for (const TargetModel& t : presets()) names.push_back(t.name);
  const std::string path(name_or_path);
  if (path.empty() || fs.kind(path) != FileSystem::Kind::kFile)
    throw usage_error("fp8a.usage.245", "--price-as " + quoted_input(name_or_path, 200) +
                                            " is neither a preset (llama-7b, llama-70b) nor a shapes file" +
                                            did_you_mean(name_or_path, names));
  const auto file = fs.map(path);
  const auto bytes = file->bytes();
  return parse_target_model(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
}

std::optional<ModuleRole> module_role(const std::string& layer, const TargetModel& target) {
  const std::string name = module_path(layer);
  for (ModuleRole r : kModuleRoles)
    for (const std::string& n : target.role(r).names)
      if (ends_with_module(name, n) || ends_with_module(layer, n)) return r;
  const auto dot = name.rfind('.');
  const std::string_view last = dot == std::string::npos ? std::string_view(name) : std::string_view(name).substr(dot + 1);
  const std::string_view before = dot == std::string::npos ? std::string_view() : std::string_view(name).substr(0, dot);
  const auto pdot = before.rfind('.');
  const std::string_view parent = pdot == std::string_view::npos ? before : before.substr(pdot + 1);
  if (one_of(last, {"linear_qkv", "layernorm_qkv", "qkv", "qkv_proj", "q_proj", "k_proj", "v_proj", "query_key_value",
                    "c_attn", "Wqkv", "wqkv"}))
    return ModuleRole::kQkv;
  if (one_of(last, {"linear_proj", "o_proj", "out_proj", "wo"}) ||
      (one_of(last, {"proj", "dense", "c_proj"}) && attention_parent(parent)))
    return ModuleRole::kProj;
  if (one_of(last, {"linear_fc1", "gate_proj", "up_proj", "gate_up_proj", "c_fc", "fc1", "dense_h_to_4h", "w1", "w3"}))
    return ModuleRole::kFc1;
  if (one_of(last, {"linear_fc2", "down_proj", "fc2", "dense_4h_to_h", "w2"}) ||
      (last == "c_proj" && one_of(parent, {"mlp", "ffn", "feed_forward"})))
    return ModuleRole::kFc2;
  if (is_lm_head(name) || one_of(last, {"output_layer", "lm_head", "embed_out"})) return ModuleRole::kHead;
  return std::nullopt;
}

std::optional<double> TargetPricing::gemm_flops(const std::string& layer) const {
  const auto it = layers.find(layer);
  if (it == layers.end()) return std::nullopt;
  const PricedLayer& p = it->second;
  return 2.0 * tokens_per_step * p.n * p.k * p.weight;
}

TargetPricing price_at_target(const TargetModel& target, std::span<const std::string> layers, double tokens_per_step,
                              std::string tokens_source, std::vector<std::string>* unmapped) {
  TargetPricing p;
  p.target = target;
  p.tokens_per_step = tokens_per_step;
  p.tokens_source = std::move(tokens_source);
  std::map<std::string, ModuleRole> roles;
  for (const std::string& layer : layers) {
    if (roles.contains(layer) || is_moe_router(module_path(layer))) continue;
    const std::optional<ModuleRole> r = module_role(layer, target);
    if (!r || target.role(*r).count == 0) {
      if (unmapped != nullptr && std::find(unmapped->begin(), unmapped->end(), layer) == unmapped->end())
        unmapped->push_back(layer);
      continue;
    }
    roles[layer] = *r;
    ++p.captured[static_cast<std::size_t>(*r)];
  }
  for (const auto& [layer, r] : roles) {
    const RoleShape& s = target.role(r);
    const double weight = static_cast<double>(s.count) / p.captured[static_cast<std::size_t>(r)];
    p.layers[layer] = {r, static_cast<double>(s.n), static_cast<double>(s.k), weight};
  }
  return p;
}

std::string pricing_basis(const TargetPricing& p) {
  std::string roles, missing;
  for (ModuleRole r : kModuleRoles) {
    const RoleShape& s = p.target.role(r);
    const int captured = p.captured[static_cast<std::size_t>(r)];
    if (s.count == 0) continue;
    if (captured == 0) {
      missing += (missing.empty() ? "" : ", ") + std::string(module_role_name(r));
      continue;
    }
    roles += format_text("%s%s %lldx%lld x%lld (from %d captured)", roles.empty() ? "" : ", ", module_role_name(r),
                         static_cast<long long>(s.n), static_cast<long long>(s.k), static_cast<long long>(s.count),
                         captured);
  }
  std::string text = escaped_input(p.target.name, 80) + "'s shapes, W [n x k] x modules: " + roles;
  if (!missing.empty()) text += "; not captured, so not priced: " + missing;
  return text;
}

}  // namespace fp8a
