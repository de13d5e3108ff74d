#include "policies/module_plan.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "core/error.hpp"
#include "core/layer_name.hpp"
#include "core/recipe_options.hpp"
#include "core/text.hpp"
#include "policies/choice.hpp"

namespace fp8a {

namespace {

// The runnable candidates Megatron's precision config can express, in order.
std::vector<std::size_t> mixable_candidates(const std::vector<CandidatePlan>& cands) {
  std::vector<std::size_t> mixable;
  for (std::size_t i = 0; i < cands.size(); ++i)
    if (cands[i].runnable && per_module_recipe(cands[i].candidate.recipe)) mixable.push_back(i);
  return mixable;
}

// The first reason a GEMM of the layer is not fp8_safe under the candidate ("" when all are).
std::string failing_reason(const LayerJudgement& l) {
  for (const GemmJudgement& j : l.gemms)
    if (j.judged && !j.fp8_safe) return std::string(gemm_name(j.gemm)) + ": " + failing_verdict(j).reason;
  return "";
}

// The plan's tiers (ModulePlan::tiers). `seconds(li, choice)`: the plan's time with module li
// under the choice and every other module in BF16.
template <typename Seconds>
std::vector<ModuleTier> plan_tiers(const std::vector<CandidatePlan>& cands, const ModulePlan& mp,
                                   const CostModel* cost, const CostRows& cost_row, const Seconds& seconds) {
  std::vector<ModuleTier> tiers;
  const auto tier_of = [&](std::optional<std::size_t> choice) -> ModuleTier& {
    for (ModuleTier& t : tiers)
      if (t.candidate == choice) return t;
    ModuleTier& t = tiers.emplace_back();
    t.candidate = choice;
    return t;
  };
  for (std::size_t li = 0; li < mp.modules.size(); ++li) {
    const std::optional<std::size_t> choice = mp.modules[li].candidate;
    ModuleTier& t = tier_of(choice);
    const LayerJudgement& l = cands[choice.value_or(mp.base)].layers[li];
    ++t.modules;
    t.flops += layer_flops(l);
    for (const GemmJudgement& j : l.gemms) t.gemms += j.judged ? 1 : 0;
    if (choice) t.risk += layer_risk(l);
    if (cost != nullptr && cost_row[li]) {
      double bf16 = 0;
      for (double g : cost->layers[*cost_row[li]].bf16_seconds) bf16 += g;
      const double in_tier = choice ? bf16 - (seconds(li, std::nullopt) - seconds(li, choice)) : bf16;
      t.bf16_seconds = t.bf16_seconds.value_or(0.0) + bf16;
      t.seconds = t.seconds.value_or(0.0) + in_tier;
    }
  }
  // The base first, BF16 last, the others by candidate index between.
  std::sort(tiers.begin(), tiers.end(), [&](const ModuleTier& x, const ModuleTier& y) {
    const auto rank = [&](const ModuleTier& t) {
      return !t.candidate ? cands.size() + 1 : *t.candidate == mp.base ? 0 : *t.candidate + 1;
    };
    return rank(x) < rank(y);
  });
  return tiers;
}

// One module's time under a choice (a candidate index, or unset: BF16), the others BF16.
using ModuleSeconds = std::function<double(std::size_t, std::optional<std::size_t>)>;

// The candidates that plan one module over `base`.
struct ModuleCandidates {
  const std::vector<CandidatePlan>& cands;
  std::size_t base;
  const std::vector<std::size_t>& mixable;
  const CostModel* cost;
  const CostRows& cost_row;
  const ModuleSeconds& seconds;
};

// One module's choice: the base where it passes all its GEMMs, else the preferred candidate
// that does (lowest risk, then preference order), else BF16; with a cost model, the fastest of
// the passing candidates and BF16 (the numbers' pick on ties), each with its reason.
ModuleChoice choose_module(const ModuleCandidates& c, std::size_t li) {
  const std::vector<CandidatePlan>& cands = c.cands;
  const CandidatePlan& b = cands[c.base];
  const auto preferred = [&](std::size_t x, std::size_t y) {
    const double rx = layer_risk(cands[x].layers[li]), ry = layer_risk(cands[y].layers[li]);
    if (!risk_tied(rx, ry)) return rx < ry;
    return preferred_candidate(cands[x].candidate, x, cands[y].candidate, y);
  };
  ModuleChoice m;
  m.layer = b.layers[li].layer;
  std::vector<std::size_t> safe;
  // Megatron's LM head takes no per-module config: FP8 only under the run's recipe (mxfp8 with
  // fp8_output_proj), never another module's.
  for (std::size_t j : c.mixable)
    if (cands[j].layers[li].fp8_safe && (j == c.base || !is_lm_head(m.layer))) safe.push_back(j);
  const bool base_safe = std::find(safe.begin(), safe.end(), c.base) != safe.end();
  std::optional<std::size_t> pick;
  if (base_safe) {
    pick = c.base;
  } else {
    for (std::size_t j : safe)
      if (!pick || preferred(j, *pick)) pick = j;
  }
  if (pick && !base_safe) {
    int judged = 0;
    for (const GemmJudgement& j : cands[*pick].layers[li].gemms) judged += j.judged ? 1 : 0;
    m.reason = format_text("%s; %s passes all its GEMMs (%s)", failing_reason(b.layers[li]).c_str(),
                           candidate_name(cands[*pick].candidate).c_str(),
                           threshold_load_text(layer_risk(cands[*pick].layers[li]), judged, "GEMM").c_str());
  }
  if (!pick)
    m.reason = format_text("no per-module recipe passes all its GEMMs (%zu tried); %s", c.mixable.size(),
                           failing_reason(b.layers[li]).c_str());
  if (c.cost != nullptr && c.cost_row[li] && !safe.empty()) {
    // The fastest of the passing candidates and BF16; the numerics' pick on ties.
    std::optional<std::size_t> fastest = pick;
    double best = c.seconds(li, pick);
    for (std::size_t j : safe) {
      const double t = c.seconds(li, j);
      if (t < best) best = t, fastest = j;
    }
    const double bf16 = c.seconds(li, std::nullopt);
    if (bf16 <= best) {
      m.reason = format_text("%s would not pay on %s: %.4g us in BF16 against %.4g us under %s "
                             "(roofline, casts included)",
                             low_precision_name(cands[*fastest].candidate.recipe.kind), c.cost->gpu->name, bf16 * 1e6,
                             best * 1e6, candidate_name(cands[*fastest].candidate).c_str());
      fastest.reset();
    } else if (fastest != pick) {
      // Where the base fails the module, that first: why not the base, then why not the pick.
      m.reason = (base_safe ? std::string() : failing_reason(b.layers[li]) + "; ") +
                 format_text("%s is faster on %s: %.4g us against %.4g us under %s (roofline); "
                             "all its GEMMs pass there",
                             candidate_name(cands[*fastest].candidate).c_str(), c.cost->gpu->name, best * 1e6,
                             c.seconds(li, pick) * 1e6, candidate_name(cands[*pick].candidate).c_str());
    }
    pick = fastest;
  }
  m.candidate = pick;
  return m;
}

// A grouped module's experts take one recipe (TE's GroupedLinear; te_precision_config.yaml can
// name only the module): where their choices differ, all of them BF16, as the config does.
void group_experts(ModulePlan& mp) {
  for (const auto& [module, layers] :
       grouped_module_members(mp.modules, [](const ModuleChoice& m) { return m.layer; })) {
    const auto differs = [&](std::size_t li) { return mp.modules[li].candidate != mp.modules[layers.front()].candidate; };
    if (!std::any_of(layers.begin(), layers.end(), differs)) continue;
    std::string why;
    for (std::size_t li : layers)
      if (!mp.modules[li].candidate) {
        why = mp.modules[li].layer + ": " + mp.modules[li].reason;
        break;
      }
    if (why.empty()) why = "its experts pass under different recipes";
    for (std::size_t li : layers)
      if (mp.modules[li].candidate) {
        mp.modules[li].candidate.reset();
        mp.modules[li].reason = "with its grouped module (TE's GroupedLinear runs all its experts in one recipe), "
                                "for " + why;
      }
  }
}

// The plan's tally (FP8 FLOPs, switched and BF16 modules, tiers, predicted speedup) and its why.
void tally_module_plan(ModulePlan& mp, const ModuleCandidates& c) {
  const std::vector<CandidatePlan>& cands = c.cands;
  const CandidatePlan& b = cands[c.base];
  for (std::size_t li = 0; li < mp.modules.size(); ++li) {
    if (const auto& pick = mp.modules[li].candidate) {
      mp.fp8_flops += layer_flops(b.layers[li]);
      if (*pick != c.base) ++mp.switched;
    } else {
      ++mp.bf16;
    }
  }
  mp.fp8_flop_share = b.total_flops > 0 ? mp.fp8_flops / b.total_flops : 0.0;
  mp.tiers = plan_tiers(cands, mp, c.cost, c.cost_row, c.seconds);
  if (c.cost != nullptr && b.speedup) {
    CostPlan plan = uniform_plan(*c.cost, kCostBf16);
    for (std::size_t li = 0; li < mp.modules.size(); ++li)
      if (c.cost_row[li] && mp.modules[li].candidate) {
        const int r = cost_recipe_index(*c.cost, cands[*mp.modules[li].candidate].candidate.recipe);
        for (int& g : plan.choice[*c.cost_row[li]]) g = r;
      }
    mp.speedup = estimate_cost(*c.cost, plan).speedup;
  }
  std::map<std::string, int> to;
  for (const ModuleChoice& m : mp.modules)
    if (m.candidate && *m.candidate != c.base) ++to[candidate_name(cands[*m.candidate].candidate)];
  mp.why = format_text("per module: %zu of %zu on %s", mp.modules.size() - mp.switched - mp.bf16, mp.modules.size(),
                       candidate_name(b.candidate).c_str());
  for (const auto& [name, n] : to) mp.why += format_text(", %d on %s", n, name.c_str());
  // "FP8", "NVFP4", or both where the tiers mix widths.
  std::set<std::string> low;
  for (const ModuleChoice& m : mp.modules)
    if (m.candidate) low.insert(low_precision_name(cands[*m.candidate].candidate.recipe.kind));
  const std::string in = low.size() == 2 ? "NVFP4 or FP8" : low.empty() ? "FP8" : *low.begin();
  mp.why += format_text(", %d in BF16; %.1f %% of the GEMM FLOPs in %s", mp.bf16, 100.0 * mp.fp8_flop_share, in.c_str());
  if (mp.speedup) mp.why += format_text(", predicted GEMM speedup %.3fx", *mp.speedup);
}

// The per-module plan over `base` and the mixable candidates.
ModulePlan plan_over(const std::vector<CandidatePlan>& cands, std::size_t base,
                     const std::vector<std::size_t>& mixable, const CostModel* cost, const CostRows& cost_row) {
  // One module's time under a choice (a candidate index, or unset: BF16), the others BF16.
  const ModuleSeconds seconds = [&](std::size_t li, std::optional<std::size_t> choice) {
    CostPlan plan = uniform_plan(*cost, kCostBf16);
    if (choice) {
      const int r = cost_recipe_index(*cost, cands[*choice].candidate.recipe);
      for (int& g : plan.choice[*cost_row[li]]) g = r;
    }
    return estimate_cost(*cost, plan).plan_seconds;
  };
  const ModuleCandidates c{cands, base, mixable, cost, cost_row, seconds};
  ModulePlan mp;
  mp.base = base;
  for (std::size_t li = 0; li < cands[base].layers.size(); ++li) mp.modules.push_back(choose_module(c, li));
  group_experts(mp);
  tally_module_plan(mp, c);
  return mp;
}

}  // namespace

bool per_module_recipe(const Recipe& r) {
  // The kind's column says whether TE's per-module configs name it at all; every option the
  // recipe sets must then be a field of those configs (an environment variable is global).
  return recipe_kind_traits(r.kind).te_per_module && carried_as_fields(r, Consumer::kPrecisionConfig);
}

std::string module_plan_note(const std::vector<CandidatePlan>& candidates, std::optional<std::size_t> chosen,
                             FallbackScope scope) {
  if (!chosen) return "no per-module plan: no FP8 candidate was chosen";
  if (scope == FallbackScope::kGlobal)
    return "no per-module plan: the policy's scope is global (one failing GEMM sends every GEMM to BF16)";
  if (mixable_candidates(candidates).empty())
    return "no per-module plan: no candidate that runs here is one Megatron's precision config can express "
           "(tensorwise, blockwise or mxfp8 with TE's defaults)";
  return "";
}

ModulePlan plan_modules(const std::vector<CandidatePlan>& candidates, std::size_t chosen, const CostModel* cost,
                        const CostRows& rows) {
  const std::vector<std::size_t> mixable = mixable_candidates(candidates);
  FP8A_CHECK(!mixable.empty(), "plan_modules: no per-module candidate (module_plan_note says why)");
  std::size_t base = mixable.front();
  for (std::size_t i : mixable)
    if (i == chosen || (base != chosen && ranks_before(candidates, i, base, cost != nullptr))) base = i;
  return plan_over(candidates, base, mixable, cost, rows);
}

std::string module_plan_conflict(const CandidatePlan& chosen, const ModulePlan& plan) {
  const std::size_t fp8_modules = plan.modules.size() - static_cast<std::size_t>(plan.bf16);
  if (chosen.fp8_gemms > 0 || fp8_modules == 0) return "";
  return format_text("no per-module plan: the chosen plan keeps no GEMM in FP8, and one per module would "
                     "keep %zu of %zu modules in FP8 (%s)",
                     fp8_modules, plan.modules.size(), plan.why.c_str());
}

WholeModulePlan plan_whole_modules(const CandidatePlan& chosen, const std::vector<LayerDecision>& layers,
                                   const CostModel* cost, const CostRows& rows) {
  WholeModulePlan w;
  const int r = cost != nullptr ? cost_recipe_index(*cost, chosen.candidate.recipe) : -1;
  CostPlan priced = cost != nullptr ? uniform_plan(*cost, kCostBf16) : CostPlan{};
  for (std::size_t li = 0; li < layers.size(); ++li) {
    std::array<Precision, 3> p{};
    bool bf16 = false, fp8 = false;
    for (const GemmDecision& g : layers[li].gemms) {
      p[static_cast<std::size_t>(g.gemm)] = g.precision;
      bf16 = bf16 || (g.judged && g.precision == Precision::kBf16);
      fp8 = fp8 || g.precision == Precision::kFp8;
    }
    if (bf16) {
      p.fill(Precision::kBf16);
      if (fp8) w.widened.push_back(li);
    }
    for (std::size_t g = 0; g < 3; ++g)
      if (p[g] == Precision::kFp8 && r >= 0 && li < rows.size() && rows[li]) priced.choice[*rows[li]][g] = r;
    w.plan.push_back(p);
  }
  w.fp8_flops = plan_fp8_flops(chosen, w.plan);
  w.fp8_flop_share = chosen.total_flops > 0 ? w.fp8_flops / chosen.total_flops : 0.0;
  if (r >= 0) w.speedup = estimate_cost(*cost, priced).speedup;
  return w;
}

}  // namespace fp8a
