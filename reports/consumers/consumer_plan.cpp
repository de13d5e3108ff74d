#include "reports/consumers/consumer_plan.hpp"

#include "core/text.hpp"

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
  precision_config_mixes = fp8 && !precision_config_omitted && r.module_plan && r.chosen &&
                           r.module_plan->base == *r.chosen && recipe_kind_traits(candidate->recipe.kind).te_per_module;
  if (candidate == nullptr) return;
  const CandidatePlan& chosen = r.candidates[*r.chosen];
  TrainedPlan per_gemm;
  per_gemm.files = {"te_snippet.py"};
  if (!nvdlfw_omitted) per_gemm.files.push_back("nvdlfw_inspect.yaml");
  per_gemm.files.push_back("recipe.json");
  for (const LayerDecision& l : r.layers) {
    std::array<Precision, 3> p{};
    for (const GemmDecision& g : l.gemms) p[static_cast<std::size_t>(g.gemm)] = g.precision;
    per_gemm.precision.push_back(p);
    per_gemm.candidate.push_back(*r.chosen);
  }
  per_gemm.fp8_flop_share = chosen.fp8_flop_share;
  per_gemm.speedup = chosen.speedup;
  TrainedPlan per_module;
  per_module.granularity = "module";
  per_module.files = {"megatron_args.txt", "megatron_bridge.yaml"};
  if (!precision_config_omitted) per_module.files.push_back("te_precision_config.yaml");
  // torchao.json trains the plan per module where torchao has the recipe; else it says none.
  if (*recipe_kind_traits(candidate->recipe.kind).torchao_recipe != '\0') per_module.files.push_back("torchao.json");
  if (precision_config_mixes) {
    const ModulePlan& mp = *r.module_plan;
    for (const ModuleChoice& m : mp.modules) {
      per_module.precision.push_back(m.candidate ? std::array{Precision::kFp8, Precision::kFp8, Precision::kFp8}
                                                 : std::array{Precision::kBf16, Precision::kBf16, Precision::kBf16});
      per_module.candidate.push_back(m.candidate);
    }
    per_module.fp8_flop_share = mp.fp8_flop_share;
    per_module.speedup = mp.speedup;
    per_module.differs = format_text("te_precision_config.yaml's per-module plan (%d module%s on other recipes, %d in BF16)",
                                     mp.switched, mp.switched == 1 ? "" : "s", mp.bf16);
  } else {
    // A recommendation made by hand (the tests') may not carry it: the same, without a cost.
    const WholeModulePlan w = r.whole_modules ? *r.whole_modules : plan_whole_modules(chosen, r.layers, nullptr, {});
    per_module.precision = w.plan;
    per_module.candidate.assign(w.plan.size(), *r.chosen);
    per_module.fp8_flop_share = w.fp8_flop_share;
    per_module.speedup = w.speedup;
    for (std::size_t i = 0; i < w.widened.size(); ++i) {
      if (i == 3) {
        per_module.differs += format_text(" and %zu more", w.widened.size() - 3);
        break;
      }
      per_module.differs += (i == 0 ? "" : ", ") + r.layers[w.widened[i]].layer;
    }
    if (!w.widened.empty())
      per_module.differs += w.widened.size() == 1 ? " whole in BF16" : " whole in BF16 (each)";
  }
  // The same GEMM by GEMM (every module on the chosen recipe where the plan keeps it FP8): no difference to name.
  bool same = per_module.precision.size() == per_gemm.precision.size();
  for (std::size_t li = 0; same && li < per_gemm.precision.size(); ++li)
    for (std::size_t g = 0; g < 3; ++g)
      same = same && per_module.precision[li][g] == per_gemm.precision[li][g] &&
             (per_gemm.precision[li][g] != Precision::kFp8 || per_module.candidate[li] == per_gemm.candidate[li]);
  if (same) per_module.differs.clear();
  if (!fp8) {  // nothing trains FP8: every file BF16
    for (TrainedPlan* t : {&per_gemm, &per_module})
      for (auto& p : t->precision) p.fill(Precision::kBf16);
  }
  trained = {std::move(per_gemm), std::move(per_module)};
}

}  // namespace fp8a
