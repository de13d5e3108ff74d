#include "policies/advice.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "core/error.hpp"
#include "core/layer_name.hpp"
#include "core/text.hpp"

namespace fp8a {

namespace {

// Whether verdict a (at step sa) is worse than b (at sb): failing first, then the lower margin,
// the higher risk, the earlier step.
bool worse(const Verdict& a, std::int64_t sa, const Verdict& b, std::int64_t sb) {
  if (a.passed != b.passed) return !a.passed;
  if (a.margin != b.margin) return a.margin < b.margin;
  if (a.risk != b.risk) return a.risk > b.risk;
  return sa < sb;
}

int kind_rank(RecipeKind kind) {
  int i = 0;
  for (RecipeKind k : kCandidatePreference) {
    if (k == kind) return i;
    ++i;
  }
  return i;
}

// Total risks this close count as a tie, so the preference order decides: a risk is a weighted
// sum of threshold loads over the GEMMs kept in FP8, and a few percent between two recipes that
// keep the same GEMMs is noise (sensitive-ends: 3.588 delayed/e4m3 against 3.616 current/hybrid).
constexpr double kRiskTieRelative = 0.10;

bool risk_tied(double a, double b) {
  return std::fabs(a - b) <= kRiskTieRelative * std::max(std::fabs(a), std::fabs(b));
}

// The numerics order: true when candidate a is preferred to b.
bool numerics_better(const CandidateAdvice& a, std::size_t ia, const CandidateAdvice& b,
                     std::size_t ib) {
  if (a.fp8_flops != b.fp8_flops) return a.fp8_flops > b.fp8_flops;
  if (!risk_tied(a.total_risk, b.total_risk)) return a.total_risk < b.total_risk;
  const int ka = kind_rank(a.candidate.recipe.kind), kb = kind_rank(b.candidate.recipe.kind);
  if (ka != kb) return ka < kb;
  if (a.candidate.format != b.candidate.format)
    return preferred_format(a.candidate.recipe.kind) == a.candidate.format;
  return ia < ib;
}

using GemmKey = std::tuple<std::int64_t, std::string, Gemm, std::string, TrainingFormat>;

// The FP8 FLOPs and total risk of the GEMMs the candidate's plan keeps in FP8, and the share.
void tally_fp8(CandidateAdvice* ca) {
  ca->fp8_flops = 0;
  ca->total_risk = 0;
  for (std::size_t li = 0; li < ca->layers.size(); ++li)
    for (const GemmJudgement& j : ca->layers[li].gemms)
      if (ca->plan[li][static_cast<int>(j.gemm)] == Precision::kFp8) {
        ca->fp8_flops += j.flops;
        ca->total_risk += j.risk;
      }
  ca->fp8_flop_share = ca->total_flops > 0 ? ca->fp8_flops / ca->total_flops : 0.0;
}

std::string kept_reason(const GemmJudgement& j, const RunCandidate& c) {
  const Verdict& v = j.worst;
  if (!v.limiting || v.margin >= kSmallMargin) return "";
  return format_text("kept FP8: step %lld %s %s %.4g against %.4g (margin %.3f < %.2f) under %s",
             static_cast<long long>(j.worst_step), gemm_name(j.gemm), criterion_name(*v.limiting),
             v.measured, v.threshold, v.margin, kSmallMargin, candidate_name(c).c_str());
}


// The cost model's index of the recipe; -1 when it does not hold it.
int cost_recipe_index(const CostModel& cost, const Recipe& recipe) {
  for (std::size_t i = 0; i < cost.recipes.size(); ++i)
    if (cost.recipes[i] == recipe) return static_cast<int>(i);
  return -1;
}

// The cost model's row of each layer of the candidates' layers() order, when it has one.
using CostRows = std::vector<std::optional<std::size_t>>;

// The first reason a GEMM of the layer is not fp8_safe under the candidate ("" when all are).
std::string failing_reason(const LayerJudgement& l) {
  for (const GemmJudgement& j : l.gemms) {
    if (!j.judged || j.fp8_safe) continue;
    const std::string& r = !j.worst.passed ? j.worst.reason : j.forecast->reason;
    return std::string(gemm_name(j.gemm)) + ": " + r;
  }
  return "";
}

double layer_risk(const LayerJudgement& l) {
  double r = 0;
  for (const GemmJudgement& j : l.gemms)
    if (j.judged) r += j.risk;
  return r;
}

double layer_flops(const LayerJudgement& l) {
  double f = 0;
  for (const GemmJudgement& j : l.gemms) f += j.flops;
  return f;
}

// The Pareto list under the chosen candidate (ParetoPoint in advice.hpp says the order).
std::vector<ParetoPoint> pareto_path(const CandidateAdvice& c, const CostModel* cost,
                                     const CostRows& cost_row) {
  struct Item {
    std::size_t li;
    int g;
    double risk;
    int group;  // 0: failing, sent to BF16; 1: safe, sent to BF16 (cost, scope); 2: kept FP8
  };
  std::vector<Item> items;
  for (std::size_t li = 0; li < c.layers.size(); ++li)
    for (const GemmJudgement& j : c.layers[li].gemms) {
      if (!j.judged) continue;
      const int g = static_cast<int>(j.gemm);
      const int group = c.plan[li][static_cast<std::size_t>(g)] == Precision::kFp8 ? 2
                        : j.fp8_safe                                           ? 1
                                                                               : 0;
      items.push_back({li, g, j.risk, group});
    }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.group != b.group) return a.group < b.group;
    return a.group != 1 && a.risk > b.risk;  // group 1 stays in layer order
  });
  const int r = cost != nullptr ? cost_recipe_index(*cost, c.candidate.recipe) : -1;
  const bool costed = r >= 0 && c.speedup.has_value();
  CostPlan plan = costed ? uniform_plan(*cost, kCostBf16) : CostPlan{};
  double fp8_flops = 0, risk = 0;
  int failing = 0, chosen_at = 0;
  std::vector<std::array<bool, 3>> fp8(c.layers.size(), {false, false, false});
  for (const Item& it : items) {
    const GemmJudgement& j = c.layers[it.li].gemms[static_cast<std::size_t>(it.g)];
    fp8[it.li][static_cast<std::size_t>(it.g)] = true;
    fp8_flops += j.flops;
    risk += j.risk;
    failing += j.fp8_safe ? 0 : 1;
    if (it.group != 2) ++chosen_at;
    if (costed && cost_row[it.li]) plan.choice[*cost_row[it.li]][static_cast<std::size_t>(it.g)] = r;
  }
  std::vector<ParetoPoint> points;
  for (std::size_t k = 0; k <= items.size(); ++k) {
    if (k > 0) {
      const Item& it = items[k - 1];
      const GemmJudgement& j = c.layers[it.li].gemms[static_cast<std::size_t>(it.g)];
      fp8[it.li][static_cast<std::size_t>(it.g)] = false;
      fp8_flops -= j.flops;
      risk -= j.risk;
      failing -= j.fp8_safe ? 0 : 1;
      if (costed && cost_row[it.li])
        plan.choice[*cost_row[it.li]][static_cast<std::size_t>(it.g)] = kCostBf16;
    }
    ParetoPoint p;
    p.gemms_to_bf16 = static_cast<int>(k);
    if (k > 0)
      p.moved = c.layers[items[k - 1].li].layer + " " +
                gemm_name(static_cast<Gemm>(items[k - 1].g));
    p.fp8_flop_share = c.total_flops > 0 ? std::max(0.0, fp8_flops) / c.total_flops : 0.0;
    if (costed) p.speedup = estimate_cost(*cost, plan).speedup;
    p.risk = k == items.size() ? 0.0 : std::max(0.0, risk);
    p.failing_in_fp8 = failing;
    p.chosen = static_cast<int>(k) == chosen_at;
    points.push_back(std::move(p));
  }
  // Drop the points another beats on both axes.
  const auto speed = [](const ParetoPoint& p) { return p.speedup ? *p.speedup : p.fp8_flop_share; };
  std::vector<ParetoPoint> kept;
  for (const ParetoPoint& p : points) {
    bool dominated = false;
    for (const ParetoPoint& q : points)
      if (&q != &p && speed(q) >= speed(p) && q.risk <= p.risk &&
          (speed(q) > speed(p) || q.risk < p.risk))
        dominated = true;
    if (!dominated || p.chosen) kept.push_back(p);
  }
  return kept;
}

// The per-module plan (ModulePlan in advice.hpp) over `base` and the mixable candidates.
ModulePlan plan_modules(const std::vector<CandidateAdvice>& cands, std::size_t base,
                        const std::vector<std::size_t>& mixable, const CostModel* cost,
                        const CostRows& cost_row) {
  ModulePlan mp;
  mp.base = base;
  const CandidateAdvice& b = cands[base];
  const auto preferred = [&](std::size_t x, std::size_t y, std::size_t li) {
    const double rx = layer_risk(cands[x].layers[li]), ry = layer_risk(cands[y].layers[li]);
    if (!risk_tied(rx, ry)) return rx < ry;
    const RunCandidate &cx = cands[x].candidate, &cy = cands[y].candidate;
    const int kx = kind_rank(cx.recipe.kind), ky = kind_rank(cy.recipe.kind);
    if (kx != ky) return kx < ky;
    if (cx.format != cy.format) return preferred_format(cx.recipe.kind) == cx.format;
    return x < y;
  };
  // One module's time under a choice (a candidate index, or unset: BF16), the others BF16.
  const auto seconds = [&](std::size_t li, std::optional<std::size_t> choice) {
    CostPlan plan = uniform_plan(*cost, kCostBf16);
    if (choice) {
      const int r = cost_recipe_index(*cost, cands[*choice].candidate.recipe);
      for (int& g : plan.choice[*cost_row[li]]) g = r;
    }
    return estimate_cost(*cost, plan).plan_seconds;
  };
  for (std::size_t li = 0; li < b.layers.size(); ++li) {
    ModuleChoice m;
    m.layer = b.layers[li].layer;
    std::vector<std::size_t> safe;
    for (std::size_t j : mixable)
      if (cands[j].layers[li].fp8_safe) safe.push_back(j);
    const bool base_safe = std::find(safe.begin(), safe.end(), base) != safe.end();
    std::optional<std::size_t> pick;
    if (base_safe) {
      pick = base;
    } else {
      for (std::size_t j : safe)
        if (!pick || preferred(j, *pick, li)) pick = j;
    }
    if (pick && !base_safe)
      m.reason = format_text("%s; %s passes all its GEMMs (risk %.3f)",
                             failing_reason(b.layers[li]).c_str(),
                             candidate_name(cands[*pick].candidate).c_str(),
                             layer_risk(cands[*pick].layers[li]));
    if (!pick)
      m.reason = format_text("no per-module recipe passes all its GEMMs (%zu tried); %s",
                             mixable.size(), failing_reason(b.layers[li]).c_str());
    if (cost != nullptr && cost_row[li] && !safe.empty()) {
      // The fastest of the passing candidates and BF16; the numerics' pick on ties.
      std::optional<std::size_t> fastest = pick;
      double best = seconds(li, pick);
      for (std::size_t j : safe) {
        const double t = seconds(li, j);
        if (t < best) best = t, fastest = j;
      }
      const double bf16 = seconds(li, std::nullopt);
      if (bf16 <= best) {
        m.reason = format_text("FP8 would not pay on %s: %.4g us in BF16 against %.4g us under %s "
                               "(roofline, casts included)",
                               cost->gpu->name, bf16 * 1e6, best * 1e6,
                               candidate_name(cands[*fastest].candidate).c_str());
        fastest.reset();
      } else if (fastest != pick) {
        m.reason = format_text("%s is faster on %s: %.4g us against %.4g us under %s (roofline); "
                               "all its GEMMs pass there",
                               candidate_name(cands[*fastest].candidate).c_str(), cost->gpu->name,
                               best * 1e6, seconds(li, pick) * 1e6,
                               candidate_name(cands[*pick].candidate).c_str());
      }
      pick = fastest;
    }
    m.candidate = pick;
    if (pick) {
      mp.fp8_flops += layer_flops(b.layers[li]);
      if (*pick != base) ++mp.switched;
    } else {
      ++mp.bf16;
    }
    mp.modules.push_back(std::move(m));
  }
  mp.fp8_flop_share = b.total_flops > 0 ? mp.fp8_flops / b.total_flops : 0.0;
  if (cost != nullptr && b.speedup) {
    CostPlan plan = uniform_plan(*cost, kCostBf16);
    for (std::size_t li = 0; li < mp.modules.size(); ++li)
      if (cost_row[li] && mp.modules[li].candidate) {
        const int r = cost_recipe_index(*cost, cands[*mp.modules[li].candidate].candidate.recipe);
        for (int& g : plan.choice[*cost_row[li]]) g = r;
      }
    mp.speedup = estimate_cost(*cost, plan).speedup;
  }
  std::map<std::string, int> to;
  for (const ModuleChoice& m : mp.modules)
    if (m.candidate && *m.candidate != base) ++to[candidate_name(cands[*m.candidate].candidate)];
  mp.why = format_text("per module: %zu of %zu on %s", mp.modules.size() - mp.switched - mp.bf16,
                       mp.modules.size(), candidate_name(b.candidate).c_str());
  for (const auto& [name, n] : to) mp.why += format_text(", %d on %s", n, name.c_str());
  mp.why += format_text(", %d in BF16; %.1f %% of the GEMM FLOPs in FP8", mp.bf16,
                        100.0 * mp.fp8_flop_share);
  if (mp.speedup) mp.why += format_text(", predicted GEMM speedup %.3fx", *mp.speedup);
  return mp;
}

// The field facts (Advisory in advice.hpp), each with when it applies.
std::vector<Advisory> field_advisories(const Recommendation& rec) {
  std::vector<Advisory> out;
  if (!rec.chosen) return out;
  const CandidateAdvice& c = rec.candidates[*rec.chosen];
  const RecipeKind kind = c.candidate.recipe.kind;
  // The same recipe in the other format, when evaluated.
  const auto other = [&]() -> const CandidateAdvice* {
    for (const CandidateAdvice& o : rec.candidates)
      if (o.candidate.recipe == c.candidate.recipe && o.candidate.format != c.candidate.format)
        return &o;
    return nullptr;
  };
  const auto numbers = [](const CandidateAdvice* o) {
    return o == nullptr ? std::string(" (not evaluated here)")
                        : format_text(" (here %.1f %% of the GEMM FLOPs in FP8 with %d GEMMs to "
                                      "BF16, risk %.3f)",
                                      100.0 * o->fp8_flop_share, o->gemms_to_bf16, o->total_risk);
  };
  if (kind == RecipeKind::kMx && c.candidate.format == TrainingFormat::kHybrid) {
    const CandidateAdvice* o = other();
    out.push_back({"NVIDIA-NeMo/Megatron-Bridge PR #638",
                   "MXFP8 with E5M2 (hybrid) gradients diverged and lowered MMLU on Nemotron5-8B; "
                   "Megatron-Bridge's MXFP8 preset and TE's MXFP8BlockScaling default use E4M3. "
                   "The captured numbers favour hybrid here; consider " +
                       (o ? candidate_name(o->candidate) : std::string("mxfp8/e4m3")) + numbers(o)});
  }
  if (kind == RecipeKind::kBlock && c.candidate.format == TrainingFormat::kE4M3) {
    const CandidateAdvice* o = other();
    out.push_back({"NVIDIA/TransformerEngine#2754",
                   "block scaling with all-E4M3 tracked BF16's loss worse than HYBRID (E5M2 "
                   "gradients) in a reported run; the captured numbers favour e4m3 here; consider " +
                       (o ? candidate_name(o->candidate) : std::string("block/hybrid")) + numbers(o)});
  }
  // The first and last captured transformer layers kept FP8 against the common rule of thumb.
  std::map<int, std::vector<std::size_t>> by_index;  // index -> layers
  for (std::size_t li = 0; li < rec.layers.size(); ++li)
    if (const auto i = transformer_layer_index(rec.layers[li].layer)) by_index[*i].push_back(li);
  std::vector<std::string> kept;
  double margin = 0;
  bool any_margin = false;
  // The first layer when it was captured (index 0), and the last captured one when it is another.
  std::vector<int> ends;
  if (!by_index.empty()) {
    const int first = by_index.begin()->first, last = by_index.rbegin()->first;
    if (first == 0) ends.push_back(0);
    if (last != first) ends.push_back(last);
  }
  for (int index : ends) {
    bool all_fp8 = true;
    for (std::size_t li : by_index[index])
      all_fp8 = all_fp8 && rec.layers[li].precision == Precision::kFp8;
    if (!all_fp8) continue;
    for (std::size_t li : by_index[index])
      for (const GemmJudgement& j : c.layers[li].gemms)
        if (j.judged && j.worst.limiting) {
          margin = any_margin ? std::min(margin, j.worst.margin) : j.worst.margin;
          any_margin = true;
        }
    kept.push_back(format_text("layers.%d (%s)", index,
                                 index == 0 ? "the first" : "the last captured"));
  }
  if (!kept.empty()) {
    std::string names = kept[0];
    if (kept.size() > 1) names += " and " + kept[1];
    out.push_back({"Megatron-LM --first-last-layers-bf16; Megatron-Bridge PR #651",
                   names + (kept.size() > 1 ? " stay" : " stays") +
                       " FP8: every GEMM passes the policy" +
                       (any_margin ? format_text(" (smallest margin %.3f)", margin) : std::string()) +
                       ". A common rule of thumb keeps the first and last layers in BF16; these "
                       "numbers do not call for it, and it costs FP8 GEMMs (Megatron-Bridge turned "
                       "it off in its current-scaling performance configs)"});
  }
  return out;
}
}  // namespace

std::string candidate_name(const RunCandidate& c) {
  return c.recipe.spec() + "/" + training_format_name(c.format);
}

TrainingFormat preferred_format(RecipeKind kind) {
  return kind == RecipeKind::kMx ? TrainingFormat::kE4M3 : TrainingFormat::kHybrid;
}

bool per_module_recipe(const Recipe& r) {
  switch (r.kind) {
    case RecipeKind::kPerTensorCurrent: return !r.pow2_scales && r.amax_epsilon == 0.0f;
    case RecipeKind::kBlock: return r.pow2_scales && !r.block_2d;
    case RecipeKind::kMx: return r.mx_rule == MxScaleRule::kTeRoundUp;
    case RecipeKind::kPerTensorDelayed:
    case RecipeKind::kBf16: return false;
  }
  return false;
}

const char* precision_name(Precision p) {
  return p == Precision::kFp8 ? "fp8" : p == Precision::kBf16 ? "bf16" : "mixed";
}

std::vector<RunCandidate> index_candidates(const EvaluationIndex& index) {
  std::vector<RunCandidate> out;
  for (const Recipe& r : index.recipes()) {
    if (r.kind == RecipeKind::kBf16) continue;
    for (TrainingFormat f : index.formats()) out.push_back({r, f});
  }
  return out;
}

Recommendation recommend(const AdviceInputs& inputs, const Policy& policy, const CostModel* cost) {
  FP8A_CHECK(inputs.index != nullptr, "recommend: no evaluation index");
  const EvaluationIndex& index = *inputs.index;

  std::map<std::pair<std::int64_t, std::string>, const GemmLayer*> complete;
  for (const GemmLayer& l : inputs.layers) complete[{l.step, l.layer}] = &l;
  std::map<GemmKey, const GemmRow*> outputs;
  for (const GemmRow& g : inputs.gemms) {
    if (g.engine != "emulated") continue;
    outputs.emplace(GemmKey{g.step, g.layer, g.gemm, g.recipe.spec(), g.format}, &g);
  }
  using ForecastKey = std::tuple<std::string, Role, std::string, Fp8Format>;
  std::map<ForecastKey, const DelayedForecast*> forecasts;
  for (const DelayedForecast& f : inputs.forecasts)
    forecasts.emplace(ForecastKey{f.layer, f.role, f.recipe, f.fp8}, &f);
  // The layers and their captured steps.
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> layers;
  for (const std::string& name : index.layers()) {
    std::set<std::int64_t> steps;
    for (const EvaluationRow* r : index.rows_of(name)) steps.insert(r->key.step);
    layers.push_back({name, {steps.begin(), steps.end()}});
  }

  // The cost model's row of each layer (layers() order), when the model has it.
  CostRows cost_row(layers.size());
  if (cost != nullptr)
    for (std::size_t li = 0; li < layers.size(); ++li)
      for (std::size_t ci = 0; ci < cost->layers.size(); ++ci)
        if (cost->layers[ci].layer == layers[li].first) cost_row[li] = ci;

  Recommendation rec;
  for (const RunCandidate& cand : inputs.candidates) {
    if (cand.recipe.kind == RecipeKind::kBf16) continue;
    CandidateAdvice ca;
    ca.candidate = cand;
    const std::string spec = cand.recipe.spec();
    for (const auto& [name, steps] : layers) {
      LayerJudgement lj;
      lj.layer = name;
      lj.steps = steps;
      bool any_judged = false, all_safe = true;
      for (std::int64_t step : steps)
        if (!complete.contains({step, name})) lj.incomplete = true;
      for (const GemmOperandUse& use : kGemmOperandUses) {
        GemmJudgement& j = lj.gemms[static_cast<int>(use.gemm)];
        j.gemm = use.gemm;
        for (std::int64_t step : steps) {
          GemmEvidence ev;
          ev.gemm = use.gemm;
          ev.a.row = index.find_for_use({step, name, use.a}, cand.recipe, cand.format,
                                        use.a_orientation);
          ev.b.row = index.find_for_use({step, name, use.b}, cand.recipe, cand.format,
                                        use.b_orientation);
          if (ev.a.row == nullptr && ev.b.row == nullptr) continue;
          const auto out = outputs.find(GemmKey{step, name, use.gemm, spec, cand.format});
          ev.output = out == outputs.end() ? nullptr : out->second;
          Verdict v = judge_gemm(ev, policy);
          ++j.steps;
          if (!v.passed) {
            ++j.failed_steps;
            j.failures.push_back({step, v});
          }
          if (!j.judged || worse(v, step, j.worst, j.worst_step)) {
            j.worst = std::move(v);
            j.worst_step = step;
            j.has_output = ev.output != nullptr;
          }
          j.judged = true;
          if (const auto it = complete.find({step, name}); it != complete.end()) {
            const GemmDims d = it->second->dims(use.gemm);
            j.flops += 2.0 * static_cast<double>(d.m) * static_cast<double>(d.n) *
                       static_cast<double>(d.k);
          }
        }
        if (j.judged && cand.recipe.kind == RecipeKind::kPerTensorDelayed)
          for (Role role : {use.a, use.b}) {
            const auto f = forecasts.find(
                ForecastKey{name, role, spec, fp8_format_for(cand.format, role)});
            if (f == forecasts.end()) continue;
            std::optional<double> steps_left;
            if (f->second->saturation_step)
              steps_left = static_cast<double>(*f->second->saturation_step - f->second->step);
            Verdict fv = judge_delayed_forecast(
                steps_left, name + " " + role_name(role) + " under " + candidate_name(cand), policy);
            if (!j.forecast || worse(fv, 0, *j.forecast, 0)) j.forecast = std::move(fv);
          }
        j.fp8_safe = j.judged && j.failed_steps == 0 && (!j.forecast || j.forecast->passed);
        j.risk = std::max(j.worst.risk, j.forecast ? j.forecast->risk : 0.0);
        ca.total_flops += j.flops;
        if (j.judged) {
          any_judged = true;
          all_safe = all_safe && j.fp8_safe;
        }
      }
      lj.fp8_safe = any_judged && all_safe;
      ca.layers.push_back(std::move(lj));
    }
    // The plan: passing GEMMs FP8; under the global scope, none when any fails.
    bool any_failed = false;
    for (const LayerJudgement& lj : ca.layers)
      for (const GemmJudgement& j : lj.gemms) any_failed = any_failed || (j.judged && !j.fp8_safe);
    const bool global_off = policy.scope == FallbackScope::kGlobal && any_failed;
    for (const LayerJudgement& lj : ca.layers) {
      std::array<Precision, 3> p{Precision::kBf16, Precision::kBf16, Precision::kBf16};
      for (const GemmJudgement& j : lj.gemms) {
        if (j.fp8_safe && !global_off) {
          p[static_cast<int>(j.gemm)] = Precision::kFp8;
        } else if (j.judged) {
          ++ca.gemms_to_bf16;
        }
      }
      ca.plan.push_back(p);
    }
    tally_fp8(&ca);
    double worst_margin = 0;
    for (const LayerJudgement& lj : ca.layers)
      for (const GemmJudgement& j : lj.gemms) {
        if (!j.judged || j.fp8_safe) continue;
        const Verdict& v = !j.worst.passed ? j.worst : *j.forecast;
        if (!ca.worst_failure.empty() && v.margin >= worst_margin) continue;
        worst_margin = v.margin;
        ca.worst_failure = lj.layer + " " + gemm_name(j.gemm) + ": " + v.reason;
      }
    struct StepWorst {
      int gemms = 0;
      const Verdict* verdict = nullptr;  // the lowest margin of the step
      std::string where;                 // its layer and GEMM
    };
    std::map<std::int64_t, StepWorst> by_step;
    for (const LayerJudgement& lj : ca.layers)
      for (const GemmJudgement& j : lj.gemms)
        for (const StepVerdict& f : j.failures) {
          StepWorst& w = by_step[f.step];
          ++w.gemms;
          if (w.verdict != nullptr && f.verdict.margin >= w.verdict->margin) continue;
          w.verdict = &f.verdict;
          w.where = lj.layer + " " + gemm_name(j.gemm);
        }
    for (const auto& [step, w] : by_step)
      ca.failures_by_step.push_back({step, w.gemms, w.where + ": " + w.verdict->reason});
    if (cost != nullptr) {
      const int r = cost_recipe_index(*cost, cand.recipe);
      if (r < 0) {
        ca.runnable = false;
        ca.excluded = cand.recipe.spec() + " is not in the cost model";
      } else if (!cost->support[static_cast<std::size_t>(r)].runs) {
        ca.runnable = false;
        ca.excluded = cost->support[static_cast<std::size_t>(r)].reason;
      } else {
        CostPlan plan = uniform_plan(*cost, kCostBf16);
        for (std::size_t li = 0; li < ca.layers.size(); ++li)
          if (cost_row[li])
            for (std::size_t g = 0; g < 3; ++g)
              if (ca.plan[li][g] == Precision::kFp8) plan.choice[*cost_row[li]][g] = r;
        ca.numerics_speedup = estimate_cost(*cost, plan).speedup;
        ca.numerics_fp8_flops = ca.fp8_flops;
        // A GEMM the numbers allow in FP8 goes to BF16 where that makes the captured GEMMs no
        // slower (FP8 would not pay there). Casts are shared by a layer's GEMMs, so repeat until
        // nothing changes (at most one pass per GEMM of a layer).
        ca.not_paying.assign(ca.layers.size(), {});
        double seconds = estimate_cost(*cost, plan).plan_seconds;  // of the plan as it stands
        for (int pass = 0; pass < 3; ++pass) {
          bool changed = false;
          for (std::size_t li = 0; li < ca.layers.size(); ++li) {
            if (!cost_row[li]) continue;
            for (std::size_t g = 0; g < 3; ++g) {
              int& choice = plan.choice[*cost_row[li]][g];
              if (choice != r) continue;
              choice = kCostBf16;
              const double without = estimate_cost(*cost, plan).plan_seconds;
              if (without > seconds) {
                choice = r;
                continue;
              }
              ca.plan[li][g] = Precision::kBf16;
              ++ca.gemms_not_paying;
              ca.not_paying[li][g] = format_text(
                  "FP8 would not pay on %s: the captured GEMMs take %.4g us with %s %s in FP8 and "
                  "%.4g us with it in BF16 (roofline, casts included)",
                  cost->gpu->name, seconds * 1e6, ca.layers[li].layer.c_str(),
                  gemm_name(ca.layers[li].gemms[g].gemm), without * 1e6);
              seconds = without;
              changed = true;
            }
          }
          if (!changed) break;
        }
        tally_fp8(&ca);
        ca.speedup = estimate_cost(*cost, plan).speedup;
      }
    }
    rec.candidates.push_back(std::move(ca));
  }

  // The choice.
  std::optional<std::size_t> best, second;
  auto better = [&](std::size_t a, std::size_t b) {
    const CandidateAdvice& x = rec.candidates[a];
    const CandidateAdvice& y = rec.candidates[b];
    if (cost != nullptr && *x.speedup != *y.speedup) return *x.speedup > *y.speedup;
    // Equally fast (e.g. all BF16 where FP8 pays nowhere): what the numbers allow decides.
    if (cost != nullptr && x.numerics_fp8_flops != y.numerics_fp8_flops)
      return x.numerics_fp8_flops > y.numerics_fp8_flops;
    return numerics_better(x, a, y, b);
  };
  for (std::size_t i = 0; i < rec.candidates.size(); ++i) {
    if (!rec.candidates[i].runnable) continue;
    if (!best || better(i, *best)) {
      second = best;
      best = i;
    } else if (!second || better(i, *second)) {
      second = i;
    }
  }
  rec.chosen = best;
  if (best) {
    const CandidateAdvice& c = rec.candidates[*best];
    rec.why = format_text("%s keeps %.1f %% of the GEMM FLOPs in FP8 with %d GEMMs to BF16",
                  candidate_name(c.candidate).c_str(), 100.0 * c.fp8_flop_share, c.gemms_to_bf16);
    if (c.gemms_not_paying > 0)
      rec.why += format_text(" and %d where FP8 would not pay", c.gemms_not_paying);
    rec.why += format_text(" (risk %.3f)", c.total_risk);
    if (c.speedup) rec.why += format_text(", predicted GEMM speedup %.3fx", *c.speedup);
    if (second) {
      const CandidateAdvice& s = rec.candidates[*second];
      const char* key = cost != nullptr && *c.speedup != *s.speedup ? "faster"
                        : cost != nullptr && c.numerics_fp8_flops != s.numerics_fp8_flops
                            ? "as fast, more GEMM FLOPs the numbers allow in FP8"
                        : c.fp8_flops != s.fp8_flops               ? "more FP8 FLOPs"
                        : !risk_tied(c.total_risk, s.total_risk)   ? "tied on FLOPs, lower risk"
                                                                   : "tied, preference order";
      rec.why += format_text("; next %s %.1f %% with %d to BF16",
                     candidate_name(s.candidate).c_str(), 100.0 * s.fp8_flop_share,
                     s.gemms_to_bf16);
      if (s.gemms_not_paying > 0) rec.why += format_text(" and %d not paying", s.gemms_not_paying);
      rec.why += format_text(" (risk %.3f)", s.total_risk);
      if (s.speedup) rec.why += format_text(", %.3fx", *s.speedup);
      rec.why += format_text(": %s", key);
    }
    // The decisions under it.
    std::string global_cause;
    if (policy.scope == FallbackScope::kGlobal)
      for (const LayerJudgement& lj : c.layers)
        for (const GemmJudgement& j : lj.gemms)
          if (global_cause.empty() && j.judged && !j.fp8_safe)
            global_cause = "every GEMM to BF16 (policy scope global): " + lj.layer + " " +
                           gemm_name(j.gemm) + ": " + j.worst.reason;
    for (std::size_t li = 0; li < c.layers.size(); ++li) {
      const LayerJudgement& lj = c.layers[li];
      LayerDecision ld;
      ld.layer = lj.layer;
      ld.incomplete = lj.incomplete;
      ld.fp8_safe = lj.fp8_safe;
      bool any_fp8 = false, any_bf16 = false;
      for (const GemmJudgement& j : lj.gemms) {
        GemmDecision& gd = ld.gemms[static_cast<int>(j.gemm)];
        gd.gemm = j.gemm;
        gd.judged = j.judged;
        gd.fp8_safe = j.fp8_safe;
        gd.precision = c.plan[li][static_cast<int>(j.gemm)];
        if (!j.judged) {
          gd.reason = format_text("%s: no operand copy captured", gemm_name(j.gemm));
          continue;
        }
        if (gd.precision == Precision::kFp8) {
          any_fp8 = true;
          gd.reason = kept_reason(j, c.candidate);
        } else {
          any_bf16 = true;
          const std::string& not_paying =
              c.not_paying.empty() ? std::string() : c.not_paying[li][static_cast<int>(j.gemm)];
          gd.reason = j.fp8_safe && !not_paying.empty() ? not_paying
                      : j.fp8_safe                      ? global_cause
                      : !j.worst.passed                 ? j.worst.reason
                                                        : j.forecast->reason;
        }
      }
      ld.precision = any_fp8 && any_bf16 ? Precision::kMixed
                     : any_fp8           ? Precision::kFp8
                                         : Precision::kBf16;
      rec.layers.push_back(std::move(ld));
    }
  }
  if (!best) {
    // Nothing to choose: every layer BF16, with why.
    if (rec.candidates.empty()) {
      rec.why = "no FP8 candidate was evaluated";
    } else {
      rec.why = "no FP8 candidate can be chosen:";
      for (const CandidateAdvice& c : rec.candidates)
        rec.why += format_text("%s %s: %s", &c == &rec.candidates.front() ? "" : ";",
                       candidate_name(c.candidate).c_str(), c.excluded.c_str());
    }
    for (const auto& [name, steps] : layers) {
      LayerDecision ld;
      ld.layer = name;
      for (std::int64_t step : steps)
        if (!complete.contains({step, name})) ld.incomplete = true;
      for (int g = 0; g < 3; ++g) {
        ld.gemms[static_cast<std::size_t>(g)].gemm = static_cast<Gemm>(g);
        ld.gemms[static_cast<std::size_t>(g)].reason = rec.why;
      }
      rec.layers.push_back(std::move(ld));
    }
  } else {
    // The tensor copies to watch: those the chosen plan's FP8 GEMMs consume, at their smallest
    // judge_tensor margin over the steps.
    const CandidateAdvice& c = rec.candidates[*best];
    std::map<std::tuple<std::string, Role, Orientation>, WatchItem> copies;
    for (std::size_t li = 0; li < c.layers.size(); ++li) {
      const LayerJudgement& lj = c.layers[li];
      for (const GemmOperandUse& use : kGemmOperandUses) {
        if (c.plan[li][static_cast<int>(use.gemm)] != Precision::kFp8) continue;
        for (const auto& [role, orientation] :
             {std::pair{use.a, use.a_orientation}, std::pair{use.b, use.b_orientation}})
          for (std::int64_t step : lj.steps) {
            const EvaluationRow* row = index.find_for_use({step, lj.layer, role}, c.candidate.recipe,
                                                          c.candidate.format, orientation);
            if (row == nullptr) continue;
            const Verdict v = judge_tensor({row}, policy);
            if (!v.limiting) continue;
            const auto key = std::tuple{lj.layer, role, orientation};
            const auto it = copies.find(key);
            if (it != copies.end() && !(v.margin < it->second.margin ||
                                        (v.margin == it->second.margin && step < it->second.step)))
              continue;
            copies[key] = {lj.layer, role, orientation, step, *v.limiting, v.measured, v.threshold,
                           v.margin};
          }
      }
    }
    for (const auto& [key, w] : copies) rec.watch.push_back(w);
    std::stable_sort(rec.watch.begin(), rec.watch.end(),
                     [](const WatchItem& x, const WatchItem& y) { return x.margin < y.margin; });
    if (rec.watch.size() > kWatchCount) rec.watch.resize(kWatchCount);
  }
  if (cost != nullptr) {
    rec.gpu = cost->gpu;
    rec.cost_source = "roofline";
  }
  if (best) {
    rec.pareto = pareto_path(rec.candidates[*best], cost, cost_row);
    // The per-module plan: over the runnable candidates Megatron's precision config can express.
    std::vector<std::size_t> mixable;
    for (std::size_t i = 0; i < rec.candidates.size(); ++i)
      if (rec.candidates[i].runnable && per_module_recipe(rec.candidates[i].candidate.recipe))
        mixable.push_back(i);
    if (policy.scope == FallbackScope::kGlobal) {
      rec.module_plan_note = "no per-module plan: the policy's scope is global (one failing GEMM "
                             "sends every GEMM to BF16)";
    } else if (mixable.empty()) {
      rec.module_plan_note = "no per-module plan: no candidate that runs here is one Megatron's "
                             "precision config can express (tensorwise, blockwise or mxfp8 with "
                             "TE's defaults)";
    } else {
      std::size_t base = mixable.front();
      for (std::size_t i : mixable)
        if (i == *best || (base != *best && better(i, base))) base = i;
      rec.module_plan = plan_modules(rec.candidates, base, mixable, cost, cost_row);
    }
  } else {
    rec.module_plan_note = "no per-module plan: no FP8 candidate was chosen";
  }
  rec.advisories = field_advisories(rec);
  // What could not be judged.
  std::set<std::int64_t> all_steps;
  for (const auto& [name, steps] : layers) all_steps.insert(steps.begin(), steps.end());
  const bool any_delayed = std::any_of(rec.candidates.begin(), rec.candidates.end(), [](const CandidateAdvice& c) {
    return c.candidate.recipe.kind == RecipeKind::kPerTensorDelayed;
  });
  const bool any_trend = std::any_of(inputs.forecasts.begin(), inputs.forecasts.end(),
                                     [](const DelayedForecast& f) { return f.has_trend; });
  if (!any_trend && (all_steps.size() <= 1 || any_delayed))
    rec.limits.push_back(format_text(
        "no amax trend: %zu captured step%s and no training log of more; how fast each amax grows, "
        "and when a delayed-scaling history would run out of headroom, is not judged (capture more "
        "steps, or pass --training-log with every step's amax)",
        all_steps.size(), all_steps.size() == 1 ? "" : "s"));
  int incomplete = 0;
  for (const LayerDecision& l : rec.layers) incomplete += l.incomplete ? 1 : 0;
  if (incomplete > 0)
    rec.limits.push_back(format_text(
        "%d layer%s without all three operands at some step: judged from the copies that exist, "
        "their GEMMs without a complete step counting no FLOPs (recipe.json: incomplete)",
        incomplete, incomplete == 1 ? "" : "s"));
  return rec;
}

}  // namespace fp8a
