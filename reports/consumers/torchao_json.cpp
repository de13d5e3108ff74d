#include "reports/consumers/torchao_json.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "core/recipe_options.hpp"
#include "reports/json_text.hpp"
#include "reports/consumers/layer_names.hpp"

namespace fp8a {

Artifact render_torchao_json(const ConsumerPlan& plan) {
  const Recommendation& rec = *plan.rec;
  nlohmann::ordered_json doc;
  const RunCandidate* c = plan.candidate;
  std::string name = c != nullptr ? recipe_kind_traits(c->recipe.kind).torchao_recipe : "", reason;
  std::vector<std::string> filter;
  if (c == nullptr) {
    reason = "no FP8 candidate was chosen: train in BF16";
  } else if (!plan.fp8) {
    name.clear();
    reason = "the plan keeps no GEMM in FP8 (" + c->recipe.spec() +
             " chosen, every GEMM BF16): train in BF16, no convert_to_float8_training, modules never "
             "captured included";
  } else if (name.empty()) {  // torchao's float8 training has no recipe of the kind
    reason = recipe_kind_traits(c->recipe.kind).torchao_none;
    if (const std::size_t at = reason.find("{spec}"); at != std::string::npos) reason.replace(at, 6, c->recipe.spec());
  } else {
    const bool gw_hp = plan.torchao_gw_hp, wgrad_only = plan.wgrad_only_fallback;
    const FormatCarriage format = carry_format(c->recipe.kind, c->format, Consumer::kTorchao);
    for (const LayerDecision& l : rec.layers) {
      const bool fd = is_fallback(l.gemms[0]) || is_fallback(l.gemms[1]);
      // The module's FQN: an expert of a grouped module is the module, listed once.
      const std::string fqn = json_name(captured_name(l.layer).name);
      if ((gw_hp ? fd : has_bf16_gemm(l)) && std::find(filter.begin(), filter.end(), fqn) == filter.end())
        filter.push_back(fqn);
    }
    if (c->recipe.kind == RecipeKind::kPerTensorCurrent) {
      reason = "current scaling; torchao's tensorwise has E5M2 gradients";
      if (format.carrier == Carrier::kField) reason += " (hybrid, as advised)";
      else reason += "; " + format.note;
      if (wgrad_only) reason += "; modules with only wgrad in BF16 are kept whole in high precision";
    } else {
      if (gw_hp) name += "_with_gw_hp";
      reason = "block scaling (" + c->recipe.spec() +
               ") is closest to torchao's rowwise (E4M3 scales per row over the whole K dimension, powers "
               "of two, not TE's 1x128 blocks: the advice's verdicts are approximate for it)";
      if (format.carrier != Carrier::kField) reason += "; " + format.note;
      if (gw_hp) reason += "; some modules keep only wgrad in BF16: rowwise_with_gw_hp runs every grad-weight GEMM in high precision";
    }
    for (const std::string& note : plan.notes(Consumer::kTorchao)) reason += "; " + note;
    reason += "; one recipe applies model-wide, filter_fqns are the captured module FQNs, each matching the "
              "module of that FQN or one whose FQN ends in '.' + it (a wrapper's prefix): "
              "convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(recipe_name), "
              "module_filter_fn=lambda mod, fqn: not any(fqn == f or fqn.endswith('.' + f) for f in filter_fqns)) "
              "(not torchtitan's substring filter_fqns, under which 'proj' would also match 'out_proj')";
    for (const ModuleGroup& g : module_groups(rec.layers, captured_name, NameMatch::kDotSuffix)) {
      const std::string note = group_note(rec.layers, g, "torchao.json");
      if (!note.empty() && has_bf16_gemm(merged_decision(rec.layers, g))) reason += "; " + note;
    }
  }
  if (name.empty())
    doc["recipe_name"] = nullptr;
  else
    doc["recipe_name"] = name;
  doc["filter_fqns"] = filter;
  doc["reason"] = reason;
  return {"torchao.json", json_document(std::move(doc), 2),
          (name.empty() ? std::string("none") : name) + ", " + std::to_string(filter.size()) + " modules kept high precision"};
}

}  // namespace fp8a
