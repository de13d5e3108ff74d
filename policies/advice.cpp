#include "policies/advice.hpp"

#include "core/error.hpp"

namespace fp8a {

std::string nothing_judged(const std::vector<CandidatePlan>& candidates) {
  const GemmJudgement* first = nullptr;
  const LayerJudgement* where = nullptr;
  for (const CandidatePlan& c : candidates)
    for (const LayerJudgement& l : c.layers)
      for (const GemmJudgement& j : l.gemms) {
        if (j.judged) return "";
        if (first == nullptr) first = &j, where = &l;
      }
  if (first == nullptr) return "";
  return std::string("nothing judged: no GEMM has both of its operands captured and paired at any step (") +
         where->layer + " " + gemm_name(first->gemm) + ": " + first->unjudged + ")";
}

Recommendation recommend(const RecommendationInputs& inputs, const Policy& policy, const GpuTarget& gpu,
                         const CostModel* cost, TeVersion te) {
  FP8A_CHECK(cost == nullptr || cost->gpu == &gpu, "recommend: the cost model is for another GPU");
  const RecommendationEvidence evidence = gather_evidence(inputs);
  const CostRows rows = cost_rows(evidence.layers, cost);
  Recommendation rec;
  rec.gpu = &gpu;
  rec.te_version = te;
  if (cost != nullptr) {
    rec.cost_source = "roofline";
    rec.at_captured_tokens = !(cost->options.tokens_per_step > 0);
    rec.cost_basis = roofline_basis(cost->options);
  }
  // Every candidate judged, planned and (with a cost model) priced; the cost model excludes the
  // candidates the GPU cannot run, without one they are left out here.
  for (const RunCandidate& candidate : inputs.candidates) {
    if (!is_fp8(candidate.recipe.kind)) continue;
    if (const RecipeSupport s = cost ? RecipeSupport{} : recipe_support(candidate.recipe, gpu); !s.runs) {
      rec.gpu_excluded.push_back({candidate_name(candidate), s.reason});
      continue;
    }
    CandidatePlan ca = plan_fallback(candidate, judge_candidate(evidence, candidate, policy), policy.scope);
    if (cost != nullptr) ca = plan_cost(std::move(ca), *cost, rows);
    if (const std::string no = te_cannot_train(candidate.recipe); !no.empty() && ca.runnable) {
      ca.runnable = false;
      ca.evaluation_only = true;
      ca.excluded = "evaluation only: " + no;
    } else if (const std::string old = te_release_cannot_train(candidate.recipe, te, gpu.sm); !old.empty() && ca.runnable) {
      ca.runnable = false;
      ca.release_excluded = true;
      ca.release_reason = old;
      ca.excluded = "excluded on TE " + te_version_text(te) + ": " + old;
    }
    rec.candidates.push_back(std::move(ca));
  }
  Choice choice = choose_candidate(rec.candidates, cost != nullptr);
  rec.why = choice_why(rec.candidates, choice, cost != nullptr);
  // Nothing to choose on when no candidate judged a GEMM: no FP8 config on no evidence.
  if (const std::string none = nothing_judged(rec.candidates); !none.empty()) {
    choice = {};
    rec.why = none;
  }
  rec.chosen = choice.chosen;
  rec.ranking = choice.ranking;
  // The plan under the chosen candidate; nothing chosen: every layer BF16, with why.
  if (choice.chosen) {
    const CandidatePlan& chosen = rec.candidates[*choice.chosen];
    rec.layers = decide_layers(chosen, policy.scope);
    rec.watch = watch_list(chosen);
    rec.pareto = pareto_path(chosen, cost, rows);
    rec.whole_modules = plan_whole_modules(chosen, rec.layers, cost, rows);
  } else {
    rec.layers = all_bf16_layers(evidence.layers, rec.why);
  }
  rec.module_plan_note = module_plan_note(rec.candidates, choice.chosen, policy.scope);
  if (rec.module_plan_note.empty()) {
    ModulePlan mp = plan_modules(rec.candidates, *choice.chosen, cost, rows);
    rec.module_plan_note = module_plan_conflict(rec.candidates[*choice.chosen], mp);
    if (rec.module_plan_note.empty()) rec.module_plan = std::move(mp);
  }
  rec.advisories = field_advisories(rec.candidates, rec.chosen, rec.layers);
  rec.limits = recommendation_limits(evidence.layers, rec.candidates, inputs.forecasts, rec.layers);
  rec.calibration = calibration_text(policy);
  return rec;
}

}  // namespace fp8a
