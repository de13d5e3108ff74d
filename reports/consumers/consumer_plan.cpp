#include "reports/consumers/consumer_plan.hpp"

#include "core/text.hpp"

#include "reports/consumers/nvdlfw_inspect_yaml.hpp"
#include "reports/consumers/te_precision_config.hpp"

namespace fp8a {

namespace {

// The members of each group (captured layers one consumer name selects: module_groups) get one
// plan, as the file gives them: a GEMM BF16 where any member's is, the whole module BF16 where
// the members' recipes differ. Says which groups changed a member's plan in `t.differs`.
void merge_groups(TrainedPlan& t, const std::vector<ModuleGroup>& groups, const std::vector<LayerDecision>& layers,
                  const char* file) {
  std::vector<std::string> changed;
  for (const ModuleGroup& group : groups) {
    if (group.layers.size() < 2) continue;
    std::array<Precision, 3> p = t.precision[group.layers.front()];
    const std::optional<std::size_t> c = t.candidate[group.layers.front()];
    bool same_recipe = true;
    for (std::size_t li : group.layers) {
      same_recipe = same_recipe && t.candidate[li] == c;
      for (std::size_t g = 0; g < 3; ++g)
        if (t.precision[li][g] == Precision::kBf16) p[g] = Precision::kBf16;
    }
    if (!same_recipe) p.fill(Precision::kBf16);
    bool any = false;
    for (std::size_t li : group.layers) {
      any = any || t.precision[li] != p;
      t.precision[li] = p;
    }
    if (!any) continue;
    std::string names;
    for (std::size_t li : group.layers) names += (names.empty() ? "" : " and ") + layers[li].layer;
    changed.push_back(names + " share one " + file + " entry ('" + group.name.name + "'), BF16 where any needs it");
  }
  for (const std::string& c : changed) t.differs += (t.differs.empty() ? "" : "; ") + c;
}

// The FP8 share of a trained plan: its low-precision GEMMs' FLOPs over every GEMM's.
double trained_share(const TrainedPlan& t, const CandidatePlan& chosen) {
  double fp8 = 0;
  for (std::size_t li = 0; li < t.precision.size() && li < chosen.layers.size(); ++li)
    for (std::size_t g = 0; g < 3; ++g)
      if (t.precision[li][g] == Precision::kFp8) fp8 += chosen.layers[li].gemms[g].flops;
  return chosen.total_flops > 0 ? fp8 / chosen.total_flops : 0.0;
}

}  // namespace

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
  // torchao.json trains a plan where torchao has the recipe; else it says none.
  const bool torchao = fp8 && *recipe_kind_traits(candidate->recipe.kind).torchao_recipe != '\0';
  bool wgrad_only = false;  // some module keeps only its wgrad in BF16
  for (const LayerDecision& l : r.layers)
    wgrad_only = wgrad_only || (is_fallback(l.gemms[2]) && !is_fallback(l.gemms[0]) && !is_fallback(l.gemms[1]));
  torchao_gw_hp = torchao && std::string(recipe_kind_traits(candidate->recipe.kind).torchao_recipe) == "rowwise" &&
                  wgrad_only;
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
  // Captured layers one file name selects together train as one there.
  if (!nvdlfw_omitted) {
    merge_groups(per_gemm, module_groups(r.layers, nvdlfw_layer_name, NameMatch::kDotSuffix), r.layers,
                 "nvdlfw_inspect.yaml");
    if (!per_gemm.differs.empty()) {
      per_gemm.fp8_flop_share = trained_share(per_gemm, chosen);
      per_gemm.speedup.reset();  // not priced: the cost model priced the plan, not this merge
    }
  }
  const std::string widened = per_module.differs;
  per_module.differs.clear();
  merge_groups(per_module, module_groups(r.layers, megatron_module_path, NameMatch::kExact), r.layers,
               "te_precision_config.yaml");
  if (!per_module.differs.empty()) {
    per_module.fp8_flop_share = trained_share(per_module, chosen);
    per_module.speedup.reset();
  }
  if (!widened.empty()) per_module.differs = widened + (per_module.differs.empty() ? "" : "; " + per_module.differs);
  // torchao.json: one recipe model-wide; a module with a BF16 GEMM kept whole in high precision
  // (under rowwise_with_gw_hp every wgrad high precision, and the modules with fprop or dgrad
  // BF16); its filter selects by dot-suffix.
  TrainedPlan by_torchao;
  if (torchao) {
    by_torchao.granularity = "module";
    by_torchao.files = {"torchao.json"};
    for (std::size_t li = 0; li < r.layers.size(); ++li) {
      const LayerDecision& l = r.layers[li];
      std::array<Precision, 3> p = per_gemm.precision[li];
      if (torchao_gw_hp) {
        p[2] = Precision::kBf16;
        if (is_fallback(l.gemms[0]) || is_fallback(l.gemms[1])) p.fill(Precision::kBf16);
      } else if (has_bf16_gemm(l)) {
        p.fill(Precision::kBf16);
      }
      by_torchao.precision.push_back(p);
      by_torchao.candidate.push_back(*r.chosen);
    }
    merge_groups(by_torchao, module_groups(r.layers, captured_name, NameMatch::kDotSuffix), r.layers, "torchao.json");
    by_torchao.fp8_flop_share = trained_share(by_torchao, chosen);
    by_torchao.differs = "torchao.json: one recipe, modules with a BF16 GEMM whole in high precision" +
                         std::string(torchao_gw_hp ? ", every wgrad in high precision (rowwise_with_gw_hp)" : "") +
                         (by_torchao.differs.empty() ? "" : "; " + by_torchao.differs);
  }
  const auto same_plan = [](const TrainedPlan& a, const TrainedPlan& b) {
    if (a.precision.size() != b.precision.size()) return false;
    for (std::size_t li = 0; li < a.precision.size(); ++li)
      for (std::size_t g = 0; g < 3; ++g)
        if (a.precision[li][g] != b.precision[li][g] ||
            (a.precision[li][g] == Precision::kFp8 && a.candidate[li] != b.candidate[li]))
          return false;
    return true;
  };
  // The same GEMM by GEMM (every module on the chosen recipe where the plan keeps it FP8): no difference to name.
  if (same_plan(per_module, per_gemm)) per_module.differs = per_gemm.differs;
  const bool torchao_apart = torchao && !same_plan(by_torchao, per_module);
  if (torchao && !torchao_apart) per_module.files.push_back("torchao.json");
  if (!fp8) {  // nothing trains FP8: every file BF16
    for (TrainedPlan* t : {&per_gemm, &per_module})
      for (auto& p : t->precision) p.fill(Precision::kBf16);
  }
  trained = {std::move(per_gemm), std::move(per_module)};
  if (torchao_apart) trained.push_back(std::move(by_torchao));
}

}  // namespace fp8a
