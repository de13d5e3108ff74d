#include "reports/advice_json.hpp"

#include <algorithm>
#include <variant>

#include "reports/json_number.hpp"
#include "reports/json_text.hpp"

namespace fp8a {

using nlohmann::ordered_json;

ordered_json te_recipe_json(const TeRecipe& t) {
  ordered_json j;
  j["class"] = t.class_name;
  j["fp8_format"] = t.fp8_format;
  for (const TeRecipeField& f : t.fields) std::visit([&](const auto& v) { j[f.name] = v; }, f.value);
  if (!t.env.empty()) {
    ordered_json env = ordered_json::object();
    for (const auto& [name, value] : t.env) env[name] = value;
    j["env"] = std::move(env);
  }
  return j;
}

ordered_json candidate_ref(const RunCandidate& c) {
  return {{"name", candidate_name(c)},
          {"recipe", c.recipe.spec()},
          {"format", training_format_name(c.format)}};
}

ordered_json candidates_json(const Recommendation& rec) {
  ordered_json out = ordered_json::array();
  for (std::size_t i = 0; i < rec.candidates.size(); ++i) {
    const CandidatePlan& c = rec.candidates[i];
    ordered_json e = candidate_ref(c.candidate);
    e["chosen"] = rec.chosen && *rec.chosen == i;
    e["runnable"] = c.runnable;
    e["excluded_reason"] = c.runnable ? ordered_json(nullptr) : ordered_json(c.excluded);
    e["fp8_flop_share"] = json_number(c.fp8_flop_share);
    e["gemm_speedup_vs_bf16"] = json_number(c.speedup);
    e["gemms_to_bf16"] = c.gemms_to_bf16;
    e["gemms_not_evaluated"] = c.gemms_not_evaluated;
    e["gemms_not_paying"] = c.gemms_not_paying;
    e["total_risk"] = json_number(c.total_risk);
    e["worst_failure"] = c.worst_failure.empty() ? ordered_json(nullptr) : ordered_json(c.worst_failure);
    ordered_json steps = ordered_json::array();
    for (const auto& f : c.failures_by_step)
      steps.push_back({{"step", f.step}, {"gemms", f.gemms}, {"not_evaluated", f.not_evaluated}, {"worst", f.worst}});
    e["failures_by_step"] = std::move(steps);
    out.push_back(std::move(e));
  }
  return out;
}

ordered_json pareto_json(const Recommendation& rec) {
  ordered_json out = ordered_json::array();
  for (const ParetoPoint& p : rec.pareto)
    out.push_back({{"gemms_to_bf16", p.gemms_to_bf16},
                   {"moved", p.moved.empty() ? ordered_json(nullptr) : ordered_json(p.moved)},
                   {"fp8_flop_share", json_number(p.fp8_flop_share)},
                   {"gemm_speedup_vs_bf16", json_number(p.speedup)},
                   {"risk", json_number(p.risk)},
                   {"failing_in_fp8", p.failing_in_fp8},
                   {"chosen", p.chosen}});
  return out;
}

ordered_json module_plan_json(const Recommendation& rec) {
  if (!rec.module_plan) return nullptr;
  const ModulePlan& mp = *rec.module_plan;
  ordered_json modules = ordered_json::array();
  for (const ModuleChoice& m : mp.modules) {
    const RunCandidate* c = m.candidate ? &rec.candidates[*m.candidate].candidate : nullptr;
    modules.push_back({{"layer", json_name(m.layer)},
                       {"precision", c ? "fp8" : "bf16"},
                       {"candidate", c ? ordered_json(candidate_name(*c)) : ordered_json(nullptr)},
                       {"recipe", c ? te_recipe_json(te_recipe_for(*c, rec.te_version)) : ordered_json(nullptr)},
                       {"reason", m.reason}});
  }
  // The tiers (issue 39's three-tier plan: e.g. NVFP4, MXFP8 for what NVFP4 cannot carry, BF16):
  // what each holds, what it risks, and with a cost model its GEMM time all in BF16 and in the tier.
  const double total = rec.candidates[mp.base].total_flops;
  ordered_json tiers = ordered_json::array();
  for (const ModuleTier& t : mp.tiers) {
    const RunCandidate* c = t.candidate ? &rec.candidates[*t.candidate].candidate : nullptr;
    tiers.push_back({{"candidate", c ? ordered_json(candidate_name(*c)) : ordered_json(nullptr)},
                     {"modules", t.modules},
                     {"gemms", t.gemms},
                     {"flop_share", json_number(total > 0 ? std::min(1.0, t.flops / total) : 0.0)},
                     {"risk", json_number(t.risk)},
                     {"bf16_seconds", json_number(t.bf16_seconds)},
                     {"seconds", json_number(t.seconds)}});
  }
  return {{"base", candidate_ref(rec.candidates[mp.base].candidate)},
          {"why", mp.why},
          {"modules", std::move(modules)},
          {"tiers", std::move(tiers)},
          {"predicted",
           {{"gemm_speedup_vs_bf16", json_number(mp.speedup)},
            {"fp8_flop_share", json_number(mp.fp8_flop_share)},
            {"modules_switched", mp.switched},
            {"modules_bf16", mp.bf16}}}};
}

ordered_json module_plan_note_json(const Recommendation& rec) {
  return rec.module_plan_note.empty() ? ordered_json(nullptr) : ordered_json(rec.module_plan_note);
}

ordered_json limits_json(const Recommendation& rec) {
  ordered_json out = ordered_json::array();
  for (const std::string& l : rec.limits) out.push_back(l);
  return out;
}

ordered_json advisories_json(const Recommendation& rec) {
  ordered_json out = ordered_json::array();
  for (const Advisory& a : rec.advisories) out.push_back({{"source", a.source}, {"text", a.text}});
  return out;
}

void add_recommendation_lists(ordered_json& out, const Recommendation& rec) {
  out["candidates"] = candidates_json(rec);
  out["pareto"] = pareto_json(rec);
  out["module_plan"] = module_plan_json(rec);
  out["module_plan_note"] = module_plan_note_json(rec);
  out["advisories"] = advisories_json(rec);
  out["limits"] = limits_json(rec);
}

}  // namespace fp8a
