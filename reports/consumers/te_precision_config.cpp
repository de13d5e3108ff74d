#include "reports/consumers/te_precision_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <optional>
#include <set>
#include <vector>
#include <string>

#include "core/error.hpp"
#include "core/recipe_options.hpp"
#include "core/te_version.hpp"
#include "core/text.hpp"
#include "reports/consumers/layer_names.hpp"
#include "reports/name_text.hpp"

namespace fp8a {
namespace {

// A comment line whatever bytes a name brings (see nvdlfw_inspect_yaml.cpp).
YAML::_Comment comment(const std::string& text) { return YAML::Comment(visible_text(text)); }

// A matcher's key, unique in the file (_2, _3 ... on a repeat).
std::string matcher_key(const std::string& name, std::set<std::string>* used) {
  std::string key = name;
  for (int k = 2; !used->insert(key).second; ++k) key = name + "_" + std::to_string(k);
  return key;
}

void emit_config(YAML::Emitter& out, const std::string& name, const RunCandidate* c) {
  out << YAML::Key << name << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "transformer_engine_config_type" << YAML::Value << "TEQuantizationParams";
  out << YAML::Key << "training_recipe" << YAML::Value;
  if (c == nullptr) {
    out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
  } else {
    out << YAML::BeginMap;
    const RecipeKindTraits& kind = recipe_kind_traits(c->recipe.kind);
    if (kind.megatron_fp4) {  // NVFP4BlockScaling() takes no format
      out << YAML::Key << "fp4_quantization_recipe" << YAML::Value << kind.megatron_recipe;
    } else {
      out << YAML::Key << "fp8_quantization_recipe" << YAML::Value << kind.megatron_recipe;
      out << YAML::Key << "fp8_format" << YAML::Value << carry_format(c->recipe.kind, c->format, Consumer::kPrecisionConfig).value;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
}

void emit_matcher(YAML::Emitter& out, const std::string& name, const std::string& config,
                  const std::string& pattern) {
  out << YAML::Key << name << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "config" << YAML::Value << config;
  out << YAML::Key << "type" << YAML::Value << "glob";
  // Every control and non-ASCII character escaped: a YAML reader folds a raw line break (U+2028,
  // NEL) in a scalar, and the pattern must reach fnmatch as it is.
  out << YAML::Key << "pattern" << YAML::Value << YAML::DoubleQuoted << YAML::EscapeNonAscii << pattern;
  out << YAML::Key << "enabled" << YAML::Value << true;
  out << YAML::EndMap;
}

}  // namespace

std::string megatron_config_name(const RunCandidate& c) {
  const RecipeKindTraits& kind = recipe_kind_traits(c.recipe.kind);
  return std::string(kind.megatron_recipe) + (kind.megatron_fp4 ? "" : "_" + std::string(training_format_name(c.format)));
}


namespace {

// A plan that keeps nothing in FP8: every module, the ones never captured too, to BF16.
Artifact every_module_bf16_file(YAML::Emitter& out, const Recommendation& rec) {
  out << comment("The plan keeps no GEMM in FP8: every module BF16, the modules never captured too.");
  std::set<std::string> listed;
  for (const LayerDecision& l : rec.layers) {
    const MappedName name = megatron_module_path(l.layer);
    if (listed.insert(name.name).second) out << YAML::Newline << comment(l.layer + " -> " + name.name + ": every GEMM BF16");
  }
  out << YAML::Newline << YAML::BeginMap << YAML::Key << "configs" << YAML::Value << YAML::BeginMap;
  emit_config(out, "bf16", nullptr);
  out << YAML::EndMap << YAML::Key << "matchers" << YAML::Value << YAML::BeginMap;
  emit_matcher(out, "every_module_bf16", "bf16", "*");
  out << YAML::EndMap << YAML::EndMap;
  FP8A_CHECK(out.good(), "te_precision_config.yaml: the YAML emitter failed");
  return Artifact{"te_precision_config.yaml", std::string(out.c_str(), out.size()) + "\n", "every module BF16"};
}

// The comments before the maps: how layer indices match under pipeline parallelism, what a
// delayed recipe cannot say here, the plan's notes, and the LM head no matcher reaches.
void emit_plan_notes(YAML::Emitter& out, const ConsumerPlan& plan, bool per_module) {
  out << comment("Layer indices are the captured ones. Megatron gives this one file to every pipeline") << YAML::Newline;
  out << comment("stage, and each stage matches its own names, counted from 0 (decoder.layers.0 is every") << YAML::Newline;
  out << comment("stage's first layer): a pattern here selects that index in each stage. Use it as it is") << YAML::Newline;
  out << comment("with --pipeline-model-parallel-size 1 only, or where the plan is the same for every stage.") << YAML::Newline;
  if (!per_module)  // delayed, the one such kind
    out << comment("Delayed scaling, its margin and history cannot be expressed here: only the BF16") << YAML::Newline
        << comment("fallbacks; the run's recipe comes from megatron_args.txt (" + plan.candidate->recipe.spec() + ").")
        << YAML::Newline;
  else
    for (const std::string& note : plan.notes(Consumer::kPrecisionConfig)) out << comment(note) << YAML::Newline;
  for (const LayerDecision& l : plan.rec->layers)
    if (megatron_module_path(l.layer).name == "output_layer") {
      out << comment("output_layer (Megatron's LM head) is not a TE module: no matcher here reaches it; it trains")
          << YAML::Newline
          << comment("BF16, or FP8 with --fp8-output-proj under mxfp8 (megatron_args.txt says which).") << YAML::Newline;
      break;
    }
}

// A module path's matcher: its config and the comment saying why.
struct ModuleMatcher {
  std::string config, why;
};

// The matcher of one module path (captured layers that share one, two stacks or two wrappers,
// get one plan, BF16 where any of them needs it): under the per-module plan `mp` the members'
// module choice when they agree, else BF16; without it, BF16 where the plan has a BF16 GEMM.
// Unset where the module runs the recipe of the "rest" matcher.
std::optional<ModuleMatcher> module_matcher(const Recommendation& rec, const ModulePlan* mp, const ModuleGroup& group) {
  const LayerDecision l = merged_decision(rec.layers, group);
  ModuleMatcher m{"bf16", l.layer + ": "};
  if (mp == nullptr) {
    if (!has_bf16_gemm(l)) return std::nullopt;
    if (!whole_layer_fallback(l)) m.why += "only " + fallback_gemm_list(l) + " BF16 in the plan; the whole module here. ";
    m.why += first_bf16_reason(l);
    return m;
  }
  // The members' module choices, merged (merge_members): one candidate if they agree, else BF16.
  std::vector<MemberPlan> members;
  for (std::size_t li : group.layers) {
    const std::optional<std::size_t> pick = li < mp->modules.size() ? mp->modules[li].candidate : std::nullopt;
    const Precision p = pick ? Precision::kFp8 : Precision::kBf16;
    members.push_back({{p, p, p}, pick});
  }
  const MergedMembers merged = merge_members(members);
  const std::size_t front = group.layers.front();
  const ModuleChoice* first = front < mp->modules.size() ? &mp->modules[front] : nullptr;
  if (merged.recipes_agree && merged.candidate && *merged.candidate == mp->base)
    return std::nullopt;  // on the base: the "rest" matcher
  if (merged.recipes_agree && merged.candidate) m.config = megatron_config_name(rec.candidates[*merged.candidate].candidate);
  if (merged.recipes_agree) {
    m.why += first != nullptr ? first->reason : "";
    return m;
  }
  m.why = group.name.name + ": BF16, its captured layers are planned differently";  // which member needs it, and why
  for (std::size_t li : group.layers)
    if (li < mp->modules.size() && !mp->modules[li].candidate) {
      m.why += "; " + rec.layers[li].layer + ": " + mp->modules[li].reason;
      break;
    }
  return m;
}

}  // namespace

std::optional<Artifact> render_te_precision_config(const ConsumerPlan& plan, std::string* why_omitted) {
  if (plan.precision_config_omitted) {
    if (why_omitted != nullptr) *why_omitted = *plan.precision_config_omitted;
    return std::nullopt;
  }
  const Recommendation& rec = *plan.rec;
  const RunCandidate* c = plan.candidate;
  const bool per_module = recipe_kind_traits(c->recipe.kind).te_per_module;  // else only the BF16 fallbacks

  YAML::Emitter out;
  out << comment("Megatron-Core --te-precision-config-file (fp8-advisor te_precision_config.yaml).") << YAML::Newline;
  out << comment("Written for Transformer Engine " + te_version_text(rec.te_version) +
                 " (--te-version); the option needs Megatron-Core 0.16+ (docs/VERSIONS.md).")
      << YAML::Newline;
  if (!plan.fp8) return every_module_bf16_file(out, rec);
  emit_plan_notes(out, plan, per_module);
  // The per-module plan when its base is the chosen recipe (the run's, from megatron_args.txt):
  // each module not on the base gets its own recipe or BF16. Otherwise the BF16 fallbacks alone.
  const ModulePlan* mp = plan.precision_config_mixes ? &*rec.module_plan : nullptr;
  std::vector<std::size_t> others;  // candidates of switched modules, first use first
  if (mp != nullptr)
    for (const ModuleChoice& m : mp->modules)
      if (m.candidate && *m.candidate != mp->base && std::find(others.begin(), others.end(), *m.candidate) == others.end())
        others.push_back(*m.candidate);
  out << YAML::BeginMap;
  out << YAML::Key << "configs" << YAML::Value << YAML::BeginMap;
  emit_config(out, "bf16", nullptr);
  if (per_module) emit_config(out, megatron_config_name(*c), c);
  for (std::size_t i : others) emit_config(out, megatron_config_name(rec.candidates[i].candidate), &rec.candidates[i].candidate);
  out << YAML::EndMap;
  out << YAML::Key << "matchers" << YAML::Value << YAML::BeginMap;
  std::set<std::string> keys = {"rest"};
  int matchers = 0;
  for (const ModuleGroup& group : module_groups(rec.layers, megatron_module_path, NameMatch::kExact)) {
    const std::optional<ModuleMatcher> m = module_matcher(rec, mp, group);
    if (!m) continue;
    const MappedName& name = group.name;
    out << YAML::Newline << comment(m->why);
    if (const std::string note = group_note(rec.layers, group, "te_precision_config.yaml"); !note.empty())
      out << YAML::Newline << comment(note);
    if (name.guess) out << YAML::Newline << comment("name mapping is a guess: " + name.note);
    emit_matcher(out, matcher_key((m->config == "bf16" ? "bf16_" : m->config + "_") + yaml_key_text(name.name), &keys),
                 m->config, fnmatch_exact_glob(name.name, name.any_dot));
    ++matchers;
  }
  if (per_module) emit_matcher(out, "rest", megatron_config_name(*c), "*");
  out << YAML::EndMap;
  out << YAML::EndMap;
  FP8A_CHECK(out.good(), "te_precision_config.yaml: the YAML emitter failed");
  return Artifact{"te_precision_config.yaml", std::string(out.c_str(), out.size()) + "\n",
                  std::to_string(matchers) + (mp != nullptr ? " module matchers" : " BF16 matchers")};
}

}  // namespace fp8a
