#include "policies/judging.hpp"

#include <algorithm>
#include <set>

#include "core/error.hpp"

namespace fp8a {

namespace {

// Whether verdict a (at step sa) is worse than b (at sb): failing first; between failing ones
// the further blocking failure (the reason shown is the step's that failed most, not one whose
// watch-only breach went further); then the lower margin, the higher risk, the earlier step.
bool worse(const Verdict& a, std::int64_t sa, const Verdict& b, std::int64_t sb) {
  if (a.passed != b.passed) return !a.passed;
  if (!a.passed && a.failing_margin != b.failing_margin) return a.failing_margin < b.failing_margin;
  if (a.margin != b.margin) return a.margin < b.margin;
  if (a.risk != b.risk) return a.risk > b.risk;
  return sa < sb;
}

// One GEMM of the layer over its captured steps, and the forecast of its operands.
GemmJudgement judge_gemm_steps(const RecommendationEvidence& ev, const CapturedLayer& layer,
                               const GemmOperandUse& use, const RunCandidate& cand,
                               const Policy& policy) {
  const std::string spec = cand.recipe.spec();
  GemmJudgement j;
  j.gemm = use.gemm;
  for (std::int64_t step : layer.steps) {
    GemmEvidence g;
    g.gemm = use.gemm;
    g.a.row = ev.index->find_for_use({step, layer.name, use.a}, cand.recipe, cand.format, use.a_orientation);
    g.b.row = ev.index->find_for_use({step, layer.name, use.b}, cand.recipe, cand.format, use.b_orientation);
    if (g.a.row == nullptr && g.b.row == nullptr) continue;
    const auto out = ev.outputs.find({step, layer.name, use.gemm, spec, cand.format});
    g.output = out == ev.outputs.end() ? nullptr : out->second;
    Verdict v = judge_gemm(g, policy);
    ++j.steps;
    if (!v.passed) {
      ++j.failed_steps;
      j.failures.push_back({step, v});
    }
    if (!j.judged || worse(v, step, j.worst, j.worst_step)) {
      j.worst = std::move(v);
      j.worst_step = step;
      j.has_output = g.output != nullptr;
    }
    j.judged = true;
    if (const auto it = ev.complete.find({step, layer.name}); it != ev.complete.end()) {
      const GemmDims d = it->second->dims(use.gemm);
      j.flops += 2.0 * static_cast<double>(d.m) * static_cast<double>(d.n) * static_cast<double>(d.k);
    }
  }
  if (j.judged && replays_history(cand.recipe.kind))
    for (Role role : {use.a, use.b}) {
      const auto f = ev.forecasts.find({layer.name, role, spec, fp8_format_for(cand.format, role)});
      if (f == ev.forecasts.end()) continue;
      Verdict fv = judge_delayed_forecast(
          *f->second, layer.name + " " + role_name(role) + " under " + candidate_name(cand), policy);
      // A forecast with no check (nothing forecast to clip) is never the worse one.
      const bool judged = fv.limiting.has_value();
      if (!j.forecast || (judged && !j.forecast->limiting) ||
          (judged == j.forecast->limiting.has_value() && worse(fv, 0, *j.forecast, 0)))
        j.forecast = std::move(fv);
    }
  j.fp8_safe = j.judged && j.failed_steps == 0 && (!j.forecast || j.forecast->passed);
  j.risk = std::max(j.worst.risk, j.forecast ? j.forecast->risk : 0.0);
  return j;
}

}  // namespace

const Verdict& failing_verdict(const GemmJudgement& j) { return !j.worst.passed ? j.worst : *j.forecast; }

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

RecommendationEvidence gather_evidence(const RecommendationInputs& inputs) {
  FP8A_CHECK(inputs.index != nullptr, "recommend: no evaluation index");
  RecommendationEvidence ev;
  ev.index = inputs.index;
  for (const GemmLayer& l : inputs.layers) ev.complete[{l.step, l.layer}] = &l;
  for (const GemmRow& g : inputs.gemms) {
    if (g.engine != "emulated") continue;
    ev.outputs.emplace(std::tuple{g.step, g.layer, g.gemm, g.recipe.spec(), g.format}, &g);
  }
  for (const DelayedForecast& f : inputs.forecasts)
    ev.forecasts.emplace(std::tuple{f.layer, f.role, f.recipe, f.fp8}, &f);
  for (const std::string& name : inputs.index->layers()) {
    std::set<std::int64_t> steps;
    for (const EvaluationRow* r : inputs.index->rows_of(name)) steps.insert(r->key.step);
    CapturedLayer l{name, {steps.begin(), steps.end()}, false};
    for (std::int64_t step : l.steps)
      if (!ev.complete.contains({step, name})) l.incomplete = true;
    ev.layers.push_back(std::move(l));
  }
  return ev;
}

std::vector<LayerJudgement> judge_candidate(const RecommendationEvidence& evidence, const RunCandidate& candidate,
                                            const Policy& policy) {
  std::vector<LayerJudgement> out;
  for (const CapturedLayer& layer : evidence.layers) {
    LayerJudgement lj;
    lj.layer = layer.name;
    lj.steps = layer.steps;
    lj.incomplete = layer.incomplete;
    bool any_judged = false, all_safe = true;
    for (const GemmOperandUse& use : kGemmOperandUses) {
      GemmJudgement& j = lj.gemms[static_cast<std::size_t>(use.gemm)];
      j = judge_gemm_steps(evidence, layer, use, candidate, policy);
      if (j.judged) {
        any_judged = true;
        all_safe = all_safe && j.fp8_safe;
      }
    }
    lj.fp8_safe = any_judged && all_safe;
    out.push_back(std::move(lj));
  }
  return out;
}

}  // namespace fp8a
