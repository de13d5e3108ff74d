#include "reports/consumers/consumer_plan.hpp"

#include "reports/consumers/nvdlfw_inspect_yaml.hpp"
#include "reports/consumers/te_precision_config.hpp"

namespace fp8a {

ConsumerPlan::ConsumerPlan(const Recommendation& r) : rec(&r) {
  candidate = chosen_candidate(r);
  fp8 = candidate != nullptr && !plan_all_bf16(r);
  if (candidate != nullptr) {
    te = te_recipe_for(*candidate, r.te_version);
    for (const Consumer c : kConsumers)
      option_notes[static_cast<int>(c)] = fp8a::option_notes(candidate->recipe, c, r.te_version);
  }
  for (std::size_t i = 0; i < r.layers.size(); ++i) {
    const LayerDecision& l = r.layers[i];
    if (has_bf16_gemm(l)) fallbacks.push_back({i, fallback_gemm_list(l), whole_layer_fallback(l), first_bf16_reason(l)});
  }
  first_last = first_last_bf16(r);
  precision_config_omitted = te_precision_config_omitted(r);
  if (fp8) {
    const auto note = [&](const std::vector<ModuleGroup>& groups, const char* file) {
      for (const ModuleGroup& g : groups)
        if (group_plans_differ(r.layers, g)) merged_modules.push_back(group_note(r.layers, g, file));
    };
    note(module_groups(r.layers, megatron_module_path, NameMatch::kExact), "te_precision_config.yaml");
    note(module_groups(r.layers, nvdlfw_layer_name, NameMatch::kDotSuffix), "nvdlfw_inspect.yaml");
  }
  std::string why;
  if (!render_nvdlfw_inspect_yaml(*this, &why)) nvdlfw_omitted = why;
  megatron = megatron_fp8(*this);
}

}  // namespace fp8a
