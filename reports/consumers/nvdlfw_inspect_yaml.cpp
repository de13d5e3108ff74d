#include "reports/consumers/nvdlfw_inspect_yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>
#include <cstdio>
#include <set>
#include <vector>

#include "core/error.hpp"
#include "core/te_version.hpp"
#include "core/text.hpp"
#include "reports/consumers/layer_names.hpp"
#include "reports/name_text.hpp"

namespace fp8a {
namespace {

// The section's key: "layer_" and the name's letters and digits (others _), made unique with a
// _2, _3 ... suffix when two names give the same key (two equal keys: the second would replace
// the first in a YAML reader).
std::string section_name(const std::string& layer, std::set<std::string>* used) {
  std::string n = "layer_";
  for (char ch : layer) n += std::isalnum(static_cast<unsigned char>(ch)) != 0 ? ch : '_';
  std::string key = n;
  for (int k = 2; !used->insert(key).second; ++k) key = n + "_" + std::to_string(k);
  return key;
}

// A comment line: the text on one line, whatever bytes a name brings (yaml-cpp starts a new
// comment line only after \n; \r, NEL or U+2028 would end the comment for a YAML reader).
YAML::_Comment comment(const std::string& text) { return YAML::Comment(visible_text(text)); }

// The roles the GEMM consumes (kGemmOperandUses: fprop X W, dgrad dY W, wgrad X dY).
std::array<Role, 2> gemm_roles(Gemm g) {
  switch (g) {
    case Gemm::kFprop: return {Role::kActivation, Role::kWeight};
    case Gemm::kDgrad: return {Role::kGradient, Role::kWeight};
    case Gemm::kWgrad: return {Role::kActivation, Role::kGradient};
  }
  return {Role::kActivation, Role::kWeight};
}

std::string margin_text(double m) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", m);
  return buf;
}

// How nvdlfw_inspect names the modules the sections select, and how to get those names.
constexpr const char* kNamingComment[] = {
    "Names: debug_api.infer_and_assign_layer_names(model) names each module 'model.' + its attribute",
    "path, wrappers included (model.module.module.decoder.layers... under Megatron's DDP and",
    "Float16Module), a transformer layer by its layer_number (global, 1-based). Megatron-Bridge's and",
    "Megatron-LM's tensor-inspect integrations call it on the wrapped model; each pattern matches the",
    "path's end at a dot, whatever wraps it. Without that call TE names its modules Layer_<n> and no",
    "section matches: call it after building the model, or set each TE module's .name yourself.",
};

void emit_flow_list(YAML::Emitter& out, const std::vector<std::string>& items) {
  out << YAML::Flow << YAML::BeginSeq;
  for (const std::string& s : items) out << s;
  out << YAML::EndSeq;
}

// TE's debug-feature names on the target release: DisableQuantizationGEMM/Layer from 2.13,
// DisableFP8GEMM/Layer before.
struct DisableFeatures {
  const char* layer;
  const char* gemm;
};
DisableFeatures disable_features(TeVersion te) {
  return te_has_disable_quantization(te) ? DisableFeatures{"DisableQuantizationLayer", "DisableQuantizationGEMM"}
                                         : DisableFeatures{"DisableFP8Layer", "DisableFP8GEMM"};
}

// The file's opening comments: the recipe, the TE release it is written for, how the names match.
void emit_header(YAML::Emitter& out, const RunCandidate& c, TeVersion te) {
  out << comment("TE debug config for nvdlfw_inspect (fp8-advisor nvdlfw_inspect.yaml), recipe " + c.recipe.spec() +
                 "/" + training_format_name(c.format) + ".")
      << YAML::Newline;
  out << comment("Written for Transformer Engine " + te_version_text(te) + " (--te-version): " +
                 (te_has_disable_quantization(te)
                      ? "DisableQuantizationGEMM/Layer need TE 2.13+; --te-version 2.12 or older writes DisableFP8GEMM/Layer."
                      : "DisableFP8GEMM/Layer (TE 2.4+); TE 2.13+ also name them DisableQuantizationGEMM/Layer."))
      << YAML::Newline;
  for (const char* line : kNamingComment) out << comment(line) << YAML::Newline;
}

// A plan that keeps nothing in FP8: one section that disables quantization in every layer, the
// layers never captured too.
Artifact every_layer_bf16_file(YAML::Emitter& out, const Recommendation& rec, const DisableFeatures& disable) {
  out << comment("The plan keeps no GEMM in FP8: every layer BF16, the layers never captured too.") << YAML::Newline
      << comment("Train without --fp8-format (megatron_args.txt); this file matters only under FP8 autocast.");
  std::set<std::string> listed;
  for (const LayerDecision& l : rec.layers) {
    const MappedName name = nvdlfw_layer_name(l.layer);
    if (listed.insert(name.name).second)
      out << YAML::Newline << comment(l.layer + " -> " + name.name + " (" + name.note + ")");
  }
  out << YAML::BeginMap << YAML::Key << "every_layer_bf16" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << true;
  out << YAML::Key << "layers" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "layer_name_regex_pattern" << YAML::Value << YAML::SingleQuoted << ".*" << YAML::EndMap;
  out << YAML::Key << "transformer_engine" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << disable.layer << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << true << YAML::EndMap;
  out << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  FP8A_CHECK(out.good(), "nvdlfw_inspect.yaml: the YAML emitter failed");
  return Artifact{"nvdlfw_inspect.yaml", std::string(out.c_str(), out.size()) + "\n", "every layer BF16"};
}

// The statistics features that watch a section's FP8 GEMMs: the recipe's own quantisation
// statistics (LogNvfp4TensorStats' two; LogFp8TensorStats' scale_inv and mse from TE 2.7,
// overflows under delayed scaling) and cur_amax / dynamic_range, on the tensors those GEMMs read.
void emit_watch_features(YAML::Emitter& out, const std::vector<const WatchItem*>& watch, RecipeKind kind, TeVersion te) {
  std::vector<std::string> tensors;
  for (Role r : {Role::kActivation, Role::kWeight, Role::kGradient})
    for (const WatchItem* w : watch) {
      const auto roles = gemm_roles(w->gemm);
      if ((roles[0] == r || roles[1] == r) && std::find(tensors.begin(), tensors.end(), role_name(r)) == tensors.end())
        tensors.push_back(role_name(r));
    }
  std::vector<std::string> stats = {"underflows%"};
  if (operand_bits(kind) == 4) {
    stats.push_back("mse");  // LogNvfp4TensorStats has these two
  } else if (te_has_fp8_scale_stats(te)) {
    stats.insert(stats.end(), {"scale_inv_min", "scale_inv_max", "mse"});
    if (replays_history(kind)) stats.insert(stats.begin() + 1, "overflows%");  // delayed scaling's only
  }
  out << YAML::Key << recipe_kind_traits(kind).nvdlfw_stats << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << true;
  out << YAML::Key << "tensors" << YAML::Value;
  emit_flow_list(out, tensors);
  out << YAML::Key << "stats" << YAML::Value;
  emit_flow_list(out, stats);
  out << YAML::Key << "freq" << YAML::Value << kWatchFrequency;
  out << YAML::EndMap;
  out << YAML::Key << "LogTensorStats" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << true;
  out << YAML::Key << "tensors" << YAML::Value;
  emit_flow_list(out, tensors);
  out << YAML::Key << "stats" << YAML::Value;
  emit_flow_list(out, {"cur_amax", "dynamic_range"});
  out << YAML::Key << "freq" << YAML::Value << kWatchFrequency;
  out << YAML::EndMap;
}

// One section (NvdlfwSection): the members' names, why BF16, what is watched, then the layer
// regex and TE's features.
void emit_section(YAML::Emitter& out, const Recommendation& rec, const NvdlfwSection& s, RecipeKind kind,
                  const DisableFeatures& disable, std::set<std::string>* sections) {
  const MappedName& name = s.group.name;
  for (std::size_t li : s.group.layers) {
    const MappedName member = nvdlfw_layer_name(rec.layers[li].layer);
    out << YAML::Newline << comment(rec.layers[li].layer + " -> " + member.name + " (" + member.note + ")");
  }
  if (const std::string note = group_note(rec.layers, s.group, "nvdlfw_inspect.yaml"); !note.empty())
    out << YAML::Newline << comment(note);
  if (!s.bf16.empty()) out << YAML::Newline << comment("BF16: " + first_bf16_reason(s.merged));
  for (const WatchItem* w : s.watch)
    out << YAML::Newline
        << comment("watch: " + std::string(gemm_name(w->gemm)) + " kept FP8 with margin " + margin_text(w->margin) +
                   " (" + criterion_name(w->criterion) +
                   (w->status == WatchStatus::kWatched  ? ", over its watch-only threshold)"
                    : w->status == WatchStatus::kFailed ? ", failed)"
                                                        : ")"));
  out << YAML::Key << section_name(name.name, sections) << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << true;
  out << YAML::Key << "layers" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "layer_name_regex_pattern" << YAML::Value << YAML::SingleQuoted
      << python_suffix_regex(name.name, name.any_dot);
  out << YAML::EndMap;
  out << YAML::Key << "transformer_engine" << YAML::Value << YAML::BeginMap;
  if (s.bf16.size() == 3) {
    out << YAML::Key << disable.layer << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "enabled" << YAML::Value << true << YAML::EndMap;
  } else if (!s.bf16.empty()) {
    out << YAML::Key << disable.gemm << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "enabled" << YAML::Value << true;
    out << YAML::Key << "gemms" << YAML::Value;
    emit_flow_list(out, s.bf16);
    out << YAML::EndMap;
  }
  if (!s.watch.empty()) emit_watch_features(out, s.watch, kind, rec.te_version);
  out << YAML::EndMap;  // transformer_engine
  out << YAML::EndMap;  // section
}

}  // namespace

std::optional<Artifact> render_nvdlfw_inspect_yaml(const ConsumerPlan& plan, std::string* why_omitted) {
  if (plan.nvdlfw_omitted) {
    if (why_omitted != nullptr) *why_omitted = *plan.nvdlfw_omitted;
    return std::nullopt;
  }
  const Recommendation& rec = *plan.rec;
  const RunCandidate& c = *plan.candidate;
  const DisableFeatures disable = disable_features(rec.te_version);
  YAML::Emitter out;
  emit_header(out, c, rec.te_version);
  if (!plan.fp8) return every_layer_bf16_file(out, rec, disable);
  out << comment("Layers not named here run the recipe: the plan judged the captured layers only.") << YAML::Newline;
  out << YAML::BeginMap;
  std::set<std::string> sections;
  int fallbacks = 0, watched_layers = 0;
  for (const NvdlfwSection& s : plan.nvdlfw_sections) {
    emit_section(out, rec, s, c.recipe.kind, disable, &sections);
    fallbacks += s.bf16.empty() ? 0 : 1;
    watched_layers += s.watch.empty() ? 0 : 1;
  }
  out << YAML::EndMap;
  FP8A_CHECK(out.good(), "nvdlfw_inspect.yaml: the YAML emitter failed");
  return Artifact{"nvdlfw_inspect.yaml", std::string(out.c_str(), out.size()) + "\n",
                  std::to_string(fallbacks) + " fallbacks, " + std::to_string(watched_layers) + " layers watched"};
}

}  // namespace fp8a
